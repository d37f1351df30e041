func.func @f(%v0: tensor<8x4xf32>) -> (tensor<8x4xf32>) {
  %v1 = nn.constant dense<-1.567> : tensor<8x4xf32>
  %v2 = nn.mul %v0, %v1 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  func.return %v2 : tensor<8x4xf32>
}
