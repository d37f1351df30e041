// Linear layer with bias and exact GELU; an example small enough to run in seconds in numba's CUDA simulator
func.func @mlp(%x: tensor<32x32xf32>, %w: tensor<32x32xf32>, %bias: tensor<32xf32>) -> tensor<32x32xf32> {
  %0 = nn.matmul %x, %w : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
  %1 = nn.add %0, %bias : (tensor<32x32xf32>, tensor<32xf32>) -> tensor<32x32xf32>
  %2 = nn.gelu %1 {approximate = "none"} : tensor<32x32xf32>
  func.return %2 : tensor<32x32xf32>
}
