func.func @f(%_4ae82: tensor<9xf32>, %2: tensor<2xf32>) -> (tensor<11xf32>, tensor<9xf32>) {
  %EKdz = nn.concat %_4ae82, %2 : (tensor<9xf32>, tensor<2xf32>) -> tensor<11xf32>
  %AS59 = nn.mul %EKdz, %EKdz : (tensor<11xf32>, tensor<11xf32>) -> tensor<11xf32>
  %Z4W = nn.log_softmax %AS59 : tensor<11xf32>
  func.return %Z4W, %_4ae82 : tensor<11xf32>, tensor<9xf32>
}
