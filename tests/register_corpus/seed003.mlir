func.func @f(%0: tensor<3xf16>, %1: tensor<8x9xf16>, %2: tensor<9xf16>, %3: tensor<8x9xf16>, %4: tensor<8x9xf16>, %5: tensor<8x9xf16>, %6: tensor<8x11x2x2xf16>) -> (tensor<3xi1>, tensor<8x9xf16>, tensor<8x9xf16>, tensor<8x11x3x1xf16>) {
  %7 = nn.rsqrt %0 : tensor<3xf16>
  %8 = nn.constant dense<0.067> : tensor<1xf16>
  %9 = nn.cmp %7, %8 {predicate = "ge"} : (tensor<3xf16>, tensor<1xf16>) -> tensor<3xi1>
  %10 = nn.rms_norm %1, %2 {axis = 1} : (tensor<8x9xf16>, tensor<9xf16>) -> tensor<8x9xf16>
  %11 = nn.sub %10, %3 : (tensor<8x9xf16>, tensor<8x9xf16>) -> tensor<8x9xf16>
  %12 = nn.max %3, %4 : (tensor<8x9xf16>, tensor<8x9xf16>) -> tensor<8x9xf16>
  %13 = nn.rms_norm %12, %5 {axis = 0, epsilon = 0.001 : f32} : (tensor<8x9xf16>, tensor<8x9xf16>) -> tensor<8x9xf16>
  %14 = nn.max_pool2d %6 {kernel = [2, 1], strides = [1, 2], pads = [1, 0, 1, 0]} : (tensor<8x11x2x2xf16>) -> tensor<8x11x3x1xf16>
  func.return %9, %11, %13, %14 : tensor<3xi1>, tensor<8x9xf16>, tensor<8x9xf16>, tensor<8x11x3x1xf16>
}
