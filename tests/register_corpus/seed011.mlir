func.func @"af.7uCpj4SfnL7-oOclnDwVEw7PUXw6buka-fE2T4dGcm3eMbu9uufZlGbb3aECiQ"(%v0: tensor<6x8x8xf16>, %v1: tensor<2x3x3x4xf16>, %v2: tensor<6x1x3x2xf16>, %v3: tensor<2x3x3x4xf16>) -> (tensor<1x2x3xf16>, tensor<2x6x1x4xf16>, tensor<2x3x3x4xf16>) {
  %v4 = nn.transpose %v0 {perm = [1, 0, 2]} : (tensor<6x8x8xf16>) -> tensor<8x6x8xf16>
  %v5 = nn.slice %v4 {starts = [6, 2, 1], limits = [8, 4, 6], strides = [2, 1, 2]} : (tensor<8x6x8xf16>) -> tensor<1x2x3xf16>
  %v6 = nn.conv2d %v1, %v2 {strides = [2, 1], pads = [0, 0, 1, 1], dilations = [1, 1], groups = 3} : (tensor<2x3x3x4xf16>, tensor<6x1x3x2xf16>) -> tensor<2x6x1x4xf16>
  %v7 = nn.div %v1, %v3 : (tensor<2x3x3x4xf16>, tensor<2x3x3x4xf16>) -> tensor<2x3x3x4xf16>
  func.return %v5, %v6, %v7 : tensor<1x2x3xf16>, tensor<2x6x1x4xf16>, tensor<2x3x3x4xf16>
}
