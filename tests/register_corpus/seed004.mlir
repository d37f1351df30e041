func.func @f(%v0: tensor<7x12x12xf32>, %v1: tensor<1x1x12xf32>, %v2: tensor<3x4xf32>, %v3: tensor<3x7x8xf32>, %v4: tensor<3x7x8xf32>, %v5: tensor<7x8xi1>) -> (tensor<7x12x12xf32>, tensor<3x4xf32>, tensor<3x7x8xi1>) {
  %v6 = nn.max %v0, %v1 : (tensor<7x12x12xf32>, tensor<1x1x12xf32>) -> tensor<7x12x12xf32>
  %v7 = nn.max %v2, %v2 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %v8 = nn.select %v5, %v3, %v4 : (tensor<7x8xi1>, tensor<3x7x8xf32>, tensor<3x7x8xf32>) -> tensor<3x7x8xf32>
  %v9 = nn.cmp %v8, %v4 {predicate = "eq"} : (tensor<3x7x8xf32>, tensor<3x7x8xf32>) -> tensor<3x7x8xi1>
  func.return %v6, %v7, %v9 : tensor<7x12x12xf32>, tensor<3x4xf32>, tensor<3x7x8xi1>
}
