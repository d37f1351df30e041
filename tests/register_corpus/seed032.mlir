func.func @f(%FIn_VwZ-zGB9DGLz_1csB1JsSyvXEzcXHlYmYhE471I0p8daV0wb: tensor<7x6x5xf16>, %c5iub06wpcJqQuxDGzQL9DFxuY5uLBL.4d5iLbJ: tensor<7x6x3xf16>, %39: tensor<7x6x3xf16>, %_3v: tensor<7x6x2xf16>, %ZIZT.J: tensor<6x8x4x2xf16>, %We9kDfLtcNcUAq3DwUxuajOg9c9oc20LoeTwOFRBq: tensor<1x6x1xf16>) -> (tensor<7x6x5xf16>, tensor<6x8x4x2xf16>, tensor<7x6x3xf16>, tensor<7x6x3xf16>, tensor<7x6x5xf16>) {
  %Iq = nn.concat %FIn_VwZ-zGB9DGLz_1csB1JsSyvXEzcXHlYmYhE471I0p8daV0wb, %c5iub06wpcJqQuxDGzQL9DFxuY5uLBL.4d5iLbJ, %39, %_3v {axis = 2} : (tensor<7x6x5xf16>, tensor<7x6x3xf16>, tensor<7x6x3xf16>, tensor<7x6x2xf16>) -> tensor<7x6x13xf16>
  %F.j = nn.min %_3v, %_3v : (tensor<7x6x2xf16>, tensor<7x6x2xf16>) -> tensor<7x6x2xf16>
  %BH = nn.broadcast_to %FIn_VwZ-zGB9DGLz_1csB1JsSyvXEzcXHlYmYhE471I0p8daV0wb : (tensor<7x6x5xf16>) -> tensor<7x6x5xf16>
  %CWXNs-48deofXPXqpwjBsPSDYjKXJVvufhbs0dGwf-NMtm9$GescII_pUH = nn.max_pool2d %ZIZT.J {kernel = [1, 1], strides = [1, 1], pads = [0, 0, 0, 0]} : (tensor<6x8x4x2xf16>) -> tensor<6x8x4x2xf16>
  %_1uZpE6GsGz7.fbHsLUSuRd27jpfH = nn.max %39, %39 : (tensor<7x6x3xf16>, tensor<7x6x3xf16>) -> tensor<7x6x3xf16>
  %_1Ic.wuTiT$SpNmOctgf5KMb = nn.pow %c5iub06wpcJqQuxDGzQL9DFxuY5uLBL.4d5iLbJ, %We9kDfLtcNcUAq3DwUxuajOg9c9oc20LoeTwOFRBq : (tensor<7x6x3xf16>, tensor<1x6x1xf16>) -> tensor<7x6x3xf16>
  func.return %BH, %CWXNs-48deofXPXqpwjBsPSDYjKXJVvufhbs0dGwf-NMtm9$GescII_pUH, %_1uZpE6GsGz7.fbHsLUSuRd27jpfH, %_1Ic.wuTiT$SpNmOctgf5KMb, %BH : tensor<7x6x5xf16>, tensor<6x8x4x2xf16>, tensor<7x6x3xf16>, tensor<7x6x3xf16>, tensor<7x6x5xf16>
}
