func.func @w.7trDZubcnq.(%EJt: tensor<6xf16>) -> (tensor<6xf16>, tensor<6xf16>) {
  %f = nn.min %EJt, %EJt : (tensor<6xf16>, tensor<6xf16>) -> tensor<6xf16>
  %yprtO2TgURZolaXzqRJHoj1w = nn.constant dense<[1.253, -1.98, -0.68, -1.644, -0.128, 0.471]> : tensor<6xf16>
  %E = nn.sub %yprtO2TgURZolaXzqRJHoj1w, %EJt : (tensor<6xf16>, tensor<6xf16>) -> tensor<6xf16>
  func.return %f, %E : tensor<6xf16>, tensor<6xf16>
}
