func.func @column_softmax(%x: tensor<8192x8192xf32>) -> tensor<8192x8192xf32> {
  %0 = nn.softmax %x {axis = 0} : tensor<8192x8192xf32>
  func.return %0 : tensor<8192x8192xf32>
}
