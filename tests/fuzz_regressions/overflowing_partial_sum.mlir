// fusec fuzz: mismatch at compare-fused
// detail: output 0: NaN at (0, 0, 0, 1): got np.float64(nan), reference np.float64(6.784180030446072e+37)
// known: no: the dot product is 6.8e37 in float64 but its f32 partial sums pass f32's range (inf in NumPy's f32 matmul, NaN in the kernel's order); the check accepts NaN where a sum overflows
// inputs: seed=323 edges=special
// found by: python -m fusec.fuzz --mode special --seed 11 --start 323 --graphs 1
func.func @f(%v0: tensor<3x1x3x4xf32>, %v1: tensor<4x1xf32>, %v2: tensor<3x3xf32>, %v3: tensor<4xf32>, %v4: tensor<4xf32>, %v5: tensor<4xf32>) -> (tensor<3x1x3x4xf32>, tensor<4xf32>) {
  %v6 = nn.matmul %v2, %v0 : (tensor<3x3xf32>, tensor<3x1x3x4xf32>) -> tensor<3x1x3x4xf32>
  %v7 = nn.layer_norm %v3, %v4, %v5 {axis = 0, epsilon = 1.0e-05} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %v6, %v7 : tensor<3x1x3x4xf32>, tensor<4xf32>
}
