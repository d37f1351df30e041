func.func @channel_stats(%x: tensor<64x128x56x56xf32>) -> (tensor<1x128x1x1xf32>, tensor<1x128x1x1xf32>) {
  %m = nn.reduce_mean %x {axes = [0, 2, 3], keepdims = true} : (tensor<64x128x56x56xf32>) -> tensor<1x128x1x1xf32>
  %d = nn.sub %x, %m : (tensor<64x128x56x56xf32>, tensor<1x128x1x1xf32>) -> tensor<64x128x56x56xf32>
  %sq = nn.mul %d, %d : (tensor<64x128x56x56xf32>, tensor<64x128x56x56xf32>) -> tensor<64x128x56x56xf32>
  %v = nn.reduce_mean %sq {axes = [0, 2, 3], keepdims = true} : (tensor<64x128x56x56xf32>) -> tensor<1x128x1x1xf32>
  func.return %m, %v : tensor<1x128x1x1xf32>, tensor<1x128x1x1xf32>
}
