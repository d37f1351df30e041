func.func @"InvrWumEHshQD46bCEiO2FzRvnX9x-T2OM82OSj5$GUs4KLG_naSSWkrSk9MKEkVWX5bO"(%v0: tensor<10x3x5xf32>, %v1: tensor<2x7xf32>, %v2: tensor<9x2x4x2xf32>, %v3: tensor<9x2x4x2xf32>, %v4: tensor<9x2x4x2xf32>) -> (tensor<10x3x5xf32>, tensor<3x2x7xi1>, tensor<9x2x4x1xf32>, tensor<9x2x4x2xf32>) {
  %v5 = nn.sigmoid %v0 : tensor<10x3x5xf32>
  %v6 = nn.constant dense<-0.441> : tensor<3x2x7xf32>
  %v7 = nn.cmp %v1, %v6 {predicate = "lt"} : (tensor<2x7xf32>, tensor<3x2x7xf32>) -> tensor<3x2x7xi1>
  %v8 = nn.max_pool2d %v2 {kernel = [1, 2], strides = [1, 2], pads = [0, 0, 0, 0]} : (tensor<9x2x4x2xf32>) -> tensor<9x2x4x1xf32>
  %v9 = nn.layer_norm %v2, %v3, %v4 {axis = 0, epsilon = 0.001 : f32} : (tensor<9x2x4x2xf32>, tensor<9x2x4x2xf32>, tensor<9x2x4x2xf32>) -> tensor<9x2x4x2xf32>
  func.return %v5, %v7, %v8, %v9 : tensor<10x3x5xf32>, tensor<3x2x7xi1>, tensor<9x2x4x1xf32>, tensor<9x2x4x2xf32>
}
