func.func @jq05wNGrJjGj(%v0: tensor<3xf32>, %v1: tensor<3xf32>, %v2: tensor<1x3xf32>, %v3: tensor<8x4x1x3xf32>) -> (tensor<3xf16>, tensor<3xf32>, tensor<1x3xf32>, tensor<8x4x1x2xf32>) {
  %v4 = nn.cast %v0 : (tensor<3xf32>) -> tensor<3xf16>
  %v5 = nn.pow %v1, %v2 : (tensor<3xf32>, tensor<1x3xf32>) -> tensor<1x3xf32>
  %v6 = nn.sigmoid %v1 : tensor<3xf32>
  %v7 = nn.transpose %v5 {perm = [0, 1]} : (tensor<1x3xf32>) -> tensor<1x3xf32>
  %v8 = nn.avg_pool2d %v3 {kernel = [1, 3], strides = [1, 2], pads = [0, 0, 0, 2]} : (tensor<8x4x1x3xf32>) -> tensor<8x4x1x2xf32>
  func.return %v4, %v6, %v7, %v8 : tensor<3xf16>, tensor<3xf32>, tensor<1x3xf32>, tensor<8x4x1x2xf32>
}
