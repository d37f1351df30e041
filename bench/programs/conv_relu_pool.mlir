func.func @conv_relu_pool(%x: tensor<32x64x56x56xf32>, %w: tensor<64x64x3x3xf32>, %b: tensor<64x1x1xf32>) -> tensor<32x64x28x28xf32> {
  %c = nn.conv2d %x, %w {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1} : (tensor<32x64x56x56xf32>, tensor<64x64x3x3xf32>) -> tensor<32x64x56x56xf32>
  %a = nn.add %c, %b : (tensor<32x64x56x56xf32>, tensor<64x1x1xf32>) -> tensor<32x64x56x56xf32>
  %r = nn.relu %a : tensor<32x64x56x56xf32>
  %p = nn.max_pool2d %r {kernel = [2, 2], strides = [2, 2], pads = [0, 0, 0, 0]} : (tensor<32x64x56x56xf32>) -> tensor<32x64x28x28xf32>
  func.return %p : tensor<32x64x28x28xf32>
}
