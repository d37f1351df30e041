func.func @logsumexp(%x: tensor<8192x32000xf32>) -> tensor<8192xf32> {
  %m = nn.reduce_max %x {axes = [1], keepdims = true} : (tensor<8192x32000xf32>) -> tensor<8192x1xf32>
  %d = nn.sub %x, %m : (tensor<8192x32000xf32>, tensor<8192x1xf32>) -> tensor<8192x32000xf32>
  %e = nn.exp %d : tensor<8192x32000xf32>
  %s = nn.reduce_sum %e {axes = [1], keepdims = true} : (tensor<8192x32000xf32>) -> tensor<8192x1xf32>
  %l = nn.log %s : tensor<8192x1xf32>
  %y = nn.add %l, %m : (tensor<8192x1xf32>, tensor<8192x1xf32>) -> tensor<8192x1xf32>
  %r = nn.reshape %y : (tensor<8192x1xf32>) -> tensor<8192xf32>
  func.return %r : tensor<8192xf32>
}
