// fusec fuzz: mismatch at compare-fused
// detail: output 0: NaN at (2,): got np.float64(nan), reference np.float64(-inf)
// known: no: an f32 dot product past f32's range (-6.5e38 in float64) is -inf in NumPy's f32 matmul (fused multiply-adds) and NaN (inf - inf) in the kernel's order; the check accepts NaN where a sum overflows
// inputs: seed=299 edges=special
// found by: python -m fusec.fuzz --mode special --seed 11 --start 299 --graphs 1
func.func @f(%v0: tensor<2x3x2x4xf32>, %v1: tensor<2x4xf32>) -> (tensor<3xf32>) {
  %v2 = nn.transpose %v1 {perm = [1, 0]} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %v3 = nn.matmul %v0, %v2 : (tensor<2x3x2x4xf32>, tensor<4x2xf32>) -> tensor<2x3x2x2xf32>
  %v5 = nn.reduce_min %v3 {axes = [-4, 2, 3], keepdims = false} : (tensor<2x3x2x2xf32>) -> tensor<3xf32>
  func.return %v5 : tensor<3xf32>
}
