func.func @"R8INHus6yvAVUmcocjF2WmUrDn00YH1n67.1IusvygPgYVY2ZTrqi4-qsq8R"(%v0: tensor<5x10x7xf32>, %v1: tensor<6x10xf32>, %v2: tensor<10xf32>, %v3: tensor<10xf32>) -> (tensor<1x1xf32>, tensor<1x1xf32>, tensor<6x10xf32>) {
  %v4 = nn.reduce_sum %v1 {axes = [0, 1], keepdims = true} : (tensor<6x10xf32>) -> tensor<1x1xf32>
  %v5 = nn.exp %v4 : tensor<1x1xf32>
  %v6 = nn.silu %v4 : tensor<1x1xf32>
  %v7 = nn.layer_norm %v1, %v2, %v3 {axis = 1, epsilon = 1.0e-05} : (tensor<6x10xf32>, tensor<10xf32>, tensor<10xf32>) -> tensor<6x10xf32>
  func.return %v5, %v6, %v7 : tensor<1x1xf32>, tensor<1x1xf32>, tensor<6x10xf32>
}
