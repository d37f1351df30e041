func.func @"<=7k+K\\**i=Dm"(%v0: tensor<11xf16>, %v1: tensor<11xf16>, %v2: tensor<11xi1>) -> (tensor<11xf16>) {
  %v3 = nn.select %v2, %v0, %v1 : (tensor<11xi1>, tensor<11xf16>, tensor<11xf16>) -> tensor<11xf16>
  func.return %v3 : tensor<11xf16>
}
