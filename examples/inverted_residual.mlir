// MobileNetV2 inverted residual block: 1x1 expand (t = 6), ReLU6, 3x3 depthwise, ReLU6, 1x1 project, skip (N1 C4 8x8); an example small enough to run in seconds in numba's CUDA simulator
func.func @inverted_residual(%x: tensor<1x4x8x8xf32>, %w_expand: tensor<24x4x1x1xf32>, %b_expand: tensor<24x1x1xf32>, %w_depthwise: tensor<24x1x3x3xf32>, %b_depthwise: tensor<24x1x1xf32>, %w_project: tensor<4x24x1x1xf32>, %b_project: tensor<4x1x1xf32>) -> tensor<1x4x8x8xf32> {
  %0 = nn.conv2d %x, %w_expand {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], groups = 1} : (tensor<1x4x8x8xf32>, tensor<24x4x1x1xf32>) -> tensor<1x24x8x8xf32>
  %1 = nn.add %0, %b_expand : (tensor<1x24x8x8xf32>, tensor<24x1x1xf32>) -> tensor<1x24x8x8xf32>
  %2 = nn.clamp %1 {min = 0.0, max = 6.0} : tensor<1x24x8x8xf32>
  %3 = nn.conv2d %2, %w_depthwise {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 24} : (tensor<1x24x8x8xf32>, tensor<24x1x3x3xf32>) -> tensor<1x24x8x8xf32>
  %4 = nn.add %3, %b_depthwise : (tensor<1x24x8x8xf32>, tensor<24x1x1xf32>) -> tensor<1x24x8x8xf32>
  %5 = nn.clamp %4 {min = 0.0, max = 6.0} : tensor<1x24x8x8xf32>
  %6 = nn.conv2d %5, %w_project {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], groups = 1} : (tensor<1x24x8x8xf32>, tensor<4x24x1x1xf32>) -> tensor<1x4x8x8xf32>
  %7 = nn.add %6, %b_project : (tensor<1x4x8x8xf32>, tensor<4x1x1xf32>) -> tensor<1x4x8x8xf32>
  %8 = nn.add %7, %x : (tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  func.return %8 : tensor<1x4x8x8xf32>
}
