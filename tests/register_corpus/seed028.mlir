func.func @"\\-4uGéBTg+\\}$dO"(%Gn$AlN9NeYk3MM-YCCu8qeEJ0PUyaDlid5ri9KeQ02XR9fkZQM: tensor<11xf32>, %W: tensor<7x6xf32>) -> (tensor<7x6xf32>, tensor<11xf32>, tensor<7x6xf32>, tensor<11xf32>) {
  %_9Lli_C_ = nn.log %Gn$AlN9NeYk3MM-YCCu8qeEJ0PUyaDlid5ri9KeQ02XR9fkZQM : tensor<11xf32>
  %_2j24L$Sh8qhtjU2MJIx.6gB7$dfA0IpG1nXU1tsrKbcQ_on = nn.reshape %_9Lli_C_ : (tensor<11xf32>) -> tensor<11xf32>
  %_1fBpY = nn.constant dense<-1.709> : tensor<10x6x4xf32>
  %_4d = nn.mul %W, %W : (tensor<7x6xf32>, tensor<7x6xf32>) -> tensor<7x6xf32>
  %BzIO = nn.max %_2j24L$Sh8qhtjU2MJIx.6gB7$dfA0IpG1nXU1tsrKbcQ_on, %_9Lli_C_ : (tensor<11xf32>, tensor<11xf32>) -> tensor<11xf32>
  %_4SgBw = nn.exp %W : tensor<7x6xf32>
  %Op = nn.erf %_2j24L$Sh8qhtjU2MJIx.6gB7$dfA0IpG1nXU1tsrKbcQ_on : tensor<11xf32>
  func.return %_4d, %BzIO, %_4SgBw, %Op : tensor<7x6xf32>, tensor<11xf32>, tensor<7x6xf32>, tensor<11xf32>
}
