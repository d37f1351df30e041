func.func @"04xG"(%v0: tensor<1x7xf32>, %v1: tensor<1x9xi64>, %v2: tensor<5x1xf32>) -> (tensor<1x1x9xf32>, tensor<5x1xf32>, tensor<1x1xf32>, tensor<1x7xf32>) {
  %v3 = nn.log_softmax %v0 : tensor<1x7xf32>
  %v4 = nn.gather %v3, %v1 {axis = -1} : (tensor<1x7xf32>, tensor<1x9xi64>) -> tensor<1x1x9xf32>
  %v5 = nn.sub %v0, %v3 : (tensor<1x7xf32>, tensor<1x7xf32>) -> tensor<1x7xf32>
  %v6 = nn.reduce_max %v5 {axes = [1], keepdims = true} : (tensor<1x7xf32>) -> tensor<1x1xf32>
  %v7 = nn.log_softmax %v2 {axis = 1} : tensor<5x1xf32>
  %v8 = nn.reduce_max %v6 {axes = [-2, 1], keepdims = true} : (tensor<1x1xf32>) -> tensor<1x1xf32>
  func.return %v4, %v7, %v8, %v5 : tensor<1x1x9xf32>, tensor<5x1xf32>, tensor<1x1xf32>, tensor<1x7xf32>
}
