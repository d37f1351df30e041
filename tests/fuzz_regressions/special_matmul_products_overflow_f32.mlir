// fusec fuzz: mismatch at compare-fused
// detail: output 0: NaN at (0, 1, 2, 0): got np.float64(nan), reference np.float64(-inf)
// fixed: the reference computed in float32, as kernels compute, is one the output may match
// inputs: seed=273 edges=special
// found by: python -m fusec.fuzz --mode special --seed 2028 --start 273 --graphs 1
func.func @f(%v0: tensor<3x4x4x4xf32>, %v1: tensor<4x1xf32>) -> (tensor<3x4x4x1xf32>) {
  %v3 = nn.matmul %v0, %v1 : (tensor<3x4x4x4xf32>, tensor<4x1xf32>) -> tensor<3x4x4x1xf32>
  func.return %v3 : tensor<3x4x4x1xf32>
}
