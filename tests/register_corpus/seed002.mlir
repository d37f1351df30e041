func.func @"U)38QM3"(%v0: tensor<f16>, %v1: tensor<6x2x4x3xf16>, %v2: tensor<5x4x5xf16>) -> (tensor<6x2x2x3xf16>, tensor<6x2x4x3xf16>, tensor<f16>) {
  %v3 = nn.max_pool2d %v1 {kernel = [3, 1], strides = [2, 1], pads = [1, 0, 0, 0]} : (tensor<6x2x4x3xf16>) -> tensor<6x2x2x3xf16>
  %v4 = nn.softmax %v1 {axis = 2} : tensor<6x2x4x3xf16>
  %v5 = nn.reduce_mean %v2 {axes = [0, 1, -1]} : (tensor<5x4x5xf16>) -> tensor<f16>
  func.return %v3, %v4, %v5 : tensor<6x2x2x3xf16>, tensor<6x2x4x3xf16>, tensor<f16>
}
