func.func @"6Ru)p<5kePdnW中"(%uwsVq-: tensor<11x7x10xf32>) -> (tensor<22x35xf32>) {
  %MKH- = nn.reshape %uwsVq- : (tensor<11x7x10xf32>) -> tensor<22x35xf32>
  func.return %MKH- : tensor<22x35xf32>
}
