// fusec fuzz: mismatch at compare-fused
// detail: output 0: inf at (): got np.float64(inf), reference np.float64(3.3895313892515355e+38)
// fixed: the reference computed in float32, as kernels compute, is one the output may match
// inputs: seed=1083 edges=special
// found by: python -m fusec.fuzz --mode special --seed 2028 --start 1083 --graphs 1
func.func @f(%0: tensor<2x4xf32>, %2: tensor<f32>) -> (tensor<f32>) {
  %6 = nn.add %2, %0 : (tensor<f32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %7 = nn.reduce_mean %6 {axes = [0, 1], keepdims = false} : (tensor<2x4xf32>) -> tensor<f32>
  func.return %7 : tensor<f32>
}
