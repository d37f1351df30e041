func.func @outer_exp_sum(%x: tensor<16384x1xf32>, %y: tensor<1x16384xf32>) -> tensor<16384xf32> {
  %s = nn.add %x, %y : (tensor<16384x1xf32>, tensor<1x16384xf32>) -> tensor<16384x16384xf32>
  %e = nn.exp %s : tensor<16384x16384xf32>
  %r = nn.reduce_sum %e {axes = [1]} : (tensor<16384x16384xf32>) -> tensor<16384xf32>
  func.return %r : tensor<16384xf32>
}
