func.func @snVqmK93tw(%v0: tensor<3x5xf32>, %v1: tensor<6x7x3x1xf32>) -> (tensor<6x7x2x1xf32>) {
  %v2 = nn.max_pool2d %v1 {kernel = [3, 1], strides = [2, 1], pads = [0, 0, 2, 0]} : (tensor<6x7x3x1xf32>) -> tensor<6x7x2x1xf32>
  func.return %v2 : tensor<6x7x2x1xf32>
}
