// fusec fuzz: mismatch at compare-fused
// detail: output 0: max abs err 0.0938 over 0.01 x max|ref| 4.2
// known: no: a layer norm over 3 nearly equal f16 values amplifies one rounding more or less into 0.06 (the references disagree that much among themselves there); the check accepts an element within the references' spread
// inputs: seed=762 edges=no
// found by: python -m fusec.fuzz --mode f16 --seed 11 --start 762 --graphs 1
func.func @f(%v0: tensor<4x4x4x3xf16>, %v1: tensor<3xf16>, %v2: tensor<3xf16>) -> (tensor<4x4x4x3xf16>) {
  %v3 = nn.silu %v0 : tensor<4x4x4x3xf16>
  %v4 = nn.clamp %v3 {max = 0.25} : tensor<4x4x4x3xf16>
  %v5 = nn.cos %v3 : tensor<4x4x4x3xf16>
  %v6 = nn.softmax %v4 {axis = 1} : tensor<4x4x4x3xf16>
  %v7 = nn.sub %v5, %v6 : (tensor<4x4x4x3xf16>, tensor<4x4x4x3xf16>) -> tensor<4x4x4x3xf16>
  %v8 = nn.layer_norm %v7, %v1, %v2 {axis = 3, epsilon = 1.0e-05} : (tensor<4x4x4x3xf16>, tensor<3xf16>, tensor<3xf16>) -> tensor<4x4x4x3xf16>
  func.return %v8 : tensor<4x4x4x3xf16>
}
