func.func @f(%v0: tensor<7x10xf32>, %v1: tensor<f32>, %v2: tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<9x10x9x5xf32>, tensor<f32>) {
  %v3 = nn.reduce_max %v0 {axes = [-2, -1]} : (tensor<7x10xf32>) -> tensor<f32>
  %v4 = nn.div %v3, %v1 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %v5 = nn.abs %v1 : tensor<f32>
  %v6 = nn.min %v5, %v5 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %v7 = nn.add %v6, %v6 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %v8 = nn.constant dense<0.771> : tensor<9x10x9x5xf32>
  %v9 = nn.add %v6, %v2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %v10 = nn.add %v9, %v9 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  func.return %v4, %v7, %v8, %v10 : tensor<f32>, tensor<f32>, tensor<9x10x9x5xf32>, tensor<f32>
}
