func.func @KmTSS_B8.(%0: tensor<12x1x3x3xf16>) -> (tensor<12x1x3x3xf16>, tensor<12x1x2x1xf16>) {
  %1 = nn.clamp %0 {min = 0.5, max = 6.0} : tensor<12x1x3x3xf16>
  %2 = nn.avg_pool2d %0 {kernel = [3, 2], strides = [1, 2], pads = [0, 0, 1, 0]} : (tensor<12x1x3x3xf16>) -> tensor<12x1x2x1xf16>
  func.return %1, %2 : tensor<12x1x3x3xf16>, tensor<12x1x2x1xf16>
}
