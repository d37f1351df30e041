// Row softmax written out as primitives (max, sub, exp, sum, div); an example small enough to run in seconds in numba's CUDA simulator
func.func @softmax(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %0 = nn.reduce_max %x {axes = [1], keepdims = true} : (tensor<8x64xf32>) -> tensor<8x1xf32>
  %1 = nn.sub %x, %0 : (tensor<8x64xf32>, tensor<8x1xf32>) -> tensor<8x64xf32>
  %2 = nn.exp %1 : tensor<8x64xf32>
  %3 = nn.reduce_sum %2 {axes = [1], keepdims = true} : (tensor<8x64xf32>) -> tensor<8x1xf32>
  %4 = nn.div %2, %3 : (tensor<8x64xf32>, tensor<8x1xf32>) -> tensor<8x64xf32>
  func.return %4 : tensor<8x64xf32>
}
