func.func @"Lz0$wD\0As$'.8R"(%v0: tensor<f32>, %v1: tensor<8x9x8xf32>, %v2: tensor<1x9x8xf32>, %v3: tensor<1x9x8xf32>, %v4: tensor<1x9x8xf32>, %v5: tensor<1x9x8xi1>, %v6: tensor<1x9x8xf32>, %v7: tensor<1x9x8xf32>, %v8: tensor<3x7x3x4xf32>, %v9: tensor<1x7x1x3xf32>) -> (tensor<f32>, tensor<11x9x8xf32>, tensor<1x9x8xf32>, tensor<3x1x5x2xf32>) {
  %v10 = nn.cast %v0 : (tensor<f32>) -> tensor<f16>
  %v11 = nn.min %v0, %v0 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %v12 = nn.concat %v4, %v3, %v2, %v1 {axis = 0} : (tensor<1x9x8xf32>, tensor<1x9x8xf32>, tensor<1x9x8xf32>, tensor<8x9x8xf32>) -> tensor<11x9x8xf32>
  %v13 = nn.abs %v0 : tensor<f32>
  %v14 = nn.select %v5, %v3, %v13 : (tensor<1x9x8xi1>, tensor<1x9x8xf32>, tensor<f32>) -> tensor<1x9x8xf32>
  %v15 = nn.layer_norm %v14, %v6, %v7 {axis = -3, epsilon = 0.001 : f32} : (tensor<1x9x8xf32>, tensor<1x9x8xf32>, tensor<1x9x8xf32>) -> tensor<1x9x8xf32>
  %v16 = nn.conv2d %v8, %v9 {strides = [1, 2], pads = [1, 0, 1, 1], dilations = [1, 1], groups = 1} : (tensor<3x7x3x4xf32>, tensor<1x7x1x3xf32>) -> tensor<3x1x5x2xf32>
  func.return %v11, %v12, %v15, %v16 : tensor<f32>, tensor<11x9x8xf32>, tensor<1x9x8xf32>, tensor<3x1x5x2xf32>
}
