func.func @sWl4Zcf.yaIRVsjSS(%v0: tensor<4xf32>, %v1: tensor<5xf32>, %v2: tensor<2x5xf32>, %v3: tensor<5x3xf32>, %v4: tensor<3x2xf32>) -> (tensor<2x5xf32>, tensor<4xf32>, tensor<3x5xf32>, tensor<3x5x3xf32>) {
  %v5 = nn.slice %v0 {starts = [1], limits = [4], strides = [1]} : (tensor<4xf32>) -> tensor<3xf32>
  %v6 = nn.sub %v1, %v2 : (tensor<5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %v7 = nn.pow %v0, %v0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %v8 = nn.matmul %v4, %v2 : (tensor<3x2xf32>, tensor<2x5xf32>) -> tensor<3x5xf32>
  %v9 = nn.constant dense<[[[-1.106, -1.642, -0.142], [-0.824, 0.238, -1.978], [1.979, -0.388, 0.589], [-0.754, 1.171, 1.358], [1.801, 0.49, -1.29]], [[-1.439, -1.775, 0.584], [1.679, -1.919, -0.222], [1.622, 1.145, -1.619], [0.171, 1.965, -0.431], [0.735, -0.832, -0.18]], [[-1.789, 0.444, 0.95], [-0.349, -1.46, 0.49], [1.042, 0.225, 0.423], [0.894, -1.09, 0.653], [0.071, 0.276, 0.073]]]> : tensor<3x5x3xf32>
  %v10 = nn.pow %v3, %v9 : (tensor<5x3xf32>, tensor<3x5x3xf32>) -> tensor<3x5x3xf32>
  func.return %v6, %v7, %v8, %v10 : tensor<2x5xf32>, tensor<4xf32>, tensor<3x5xf32>, tensor<3x5x3xf32>
}
