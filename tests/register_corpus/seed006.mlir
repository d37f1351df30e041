func.func @f(%v0: tensor<5x12xf32>, %v1: tensor<i32>, %v2: tensor<11x1x12xf32>, %v3: tensor<12x4xf32>) -> (tensor<5xf32>, tensor<11x1x12xf32>, tensor<11x1x4xf32>) {
  %v4 = nn.gather %v0, %v1 {axis = -1} : (tensor<5x12xf32>, tensor<i32>) -> tensor<5xf32>
  %v5 = nn.log %v2 : tensor<11x1x12xf32>
  %v6 = nn.matmul %v2, %v3 : (tensor<11x1x12xf32>, tensor<12x4xf32>) -> tensor<11x1x4xf32>
  func.return %v4, %v5, %v6 : tensor<5xf32>, tensor<11x1x12xf32>, tensor<11x1x4xf32>
}
