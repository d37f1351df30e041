func.func @"GsZz.zJAWx-"(%v0: tensor<11x1x10xf32>) -> (tensor<1x1x2xf32>, tensor<11x1x10xf32>, tensor<11x1x10xf32>) {
  %v1 = nn.slice %v0 {starts = [0, 0, 7], limits = [1, 1, 10], strides = [2, 1, 2]} : (tensor<11x1x10xf32>) -> tensor<1x1x2xf32>
  %v2 = nn.sub %v0, %v0 : (tensor<11x1x10xf32>, tensor<11x1x10xf32>) -> tensor<11x1x10xf32>
  func.return %v1, %v2, %v0 : tensor<1x1x2xf32>, tensor<11x1x10xf32>, tensor<11x1x10xf32>
}
