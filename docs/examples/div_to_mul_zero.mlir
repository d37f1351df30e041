// Input of div_to_mul.mlir's error test: a division by a constant zero.
func.func @zero(%x: tensor<2xf32>) -> tensor<2xf32> {
  %c = nn.constant dense<[2.0, 0.0]> : tensor<2xf32>
  %y = nn.div %x, %c : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  func.return %y : tensor<2xf32>
}
