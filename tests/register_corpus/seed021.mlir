func.func @f(%v0: tensor<8x6xf32>, %v1: tensor<9xf32>, %v2: tensor<5x9xi64>, %v3: tensor<8x6xf32>, %v4: tensor<8x6xf32>) -> (tensor<5x9xf32>, tensor<8x6xi1>, tensor<8x6xf32>, tensor<8x6xf32>) {
  %v5 = nn.reduce_mean %v1 {axes = [0], keepdims = true} : (tensor<9xf32>) -> tensor<1xf32>
  %v6 = nn.gather %v5, %v2 {axis = -1} : (tensor<1xf32>, tensor<5x9xi64>) -> tensor<5x9xf32>
  %v7 = nn.pow %v0, %v0 : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %v8 = nn.cmp %v7, %v3 {predicate = "le"} : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xi1>
  %v9 = nn.rms_norm %v7, %v4 {axis = -2, epsilon = 1.0e-05} : (tensor<8x6xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %v10 = nn.relu %v3 : tensor<8x6xf32>
  func.return %v6, %v8, %v9, %v10 : tensor<5x9xf32>, tensor<8x6xi1>, tensor<8x6xf32>, tensor<8x6xf32>
}
