func.func @_4h9Eao2ZqlPEYa(%v0: tensor<8x4xf32>, %v1: tensor<3x10xf32>, %v2: tensor<8x4xf32>) -> (tensor<3x10xf32>, tensor<8x4xf32>) {
  %v3 = nn.softmax %v1 {axis = -2} : tensor<3x10xf32>
  %v4 = nn.pow %v0, %v2 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  func.return %v3, %v4 : tensor<3x10xf32>, tensor<8x4xf32>
}
