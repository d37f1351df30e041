func.func @f4bJftFBAbaiaSIQq(%v0: tensor<4x4xf32>, %v1: tensor<8x11x4x3xf32>) -> (tensor<8x11x2x2xf32>) {
  %v2 = nn.max_pool2d %v1 {kernel = [2, 2], strides = [2, 2], pads = [0, 1, 1, 0]} : (tensor<8x11x4x3xf32>) -> tensor<8x11x2x2xf32>
  func.return %v2 : tensor<8x11x2x2xf32>
}
