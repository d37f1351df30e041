func.func @f(%odBdc: tensor<7x3xf16>, %kaRopD: tensor<7x3xf16>, %UJVQ-3B: tensor<4x5x4xf16>, %_2cVHfExne7N: tensor<2x5x4xf16>, %q5YDLu2: tensor<1x5x4xf16>) -> (tensor<7x3xf16>, tensor<7x3xf16>, tensor<4x5x4xf16>, tensor<7x5x4xf16>) {
  %genuZI.j6.WedsOYplbk7qOg$LMGv = nn.erf %odBdc : tensor<7x3xf16>
  %_4O.MJ = nn.max %genuZI.j6.WedsOYplbk7qOg$LMGv, %kaRopD : (tensor<7x3xf16>, tensor<7x3xf16>) -> tensor<7x3xf16>
  %$weV-x = nn.silu %kaRopD : tensor<7x3xf16>
  %yAIx = nn.abs %UJVQ-3B : tensor<4x5x4xf16>
  %JJ. = nn.concat %UJVQ-3B, %_2cVHfExne7N, %q5YDLu2 {axis = -3} : (tensor<4x5x4xf16>, tensor<2x5x4xf16>, tensor<1x5x4xf16>) -> tensor<7x5x4xf16>
  func.return %_4O.MJ, %$weV-x, %yAIx, %JJ. : tensor<7x3xf16>, tensor<7x3xf16>, tensor<4x5x4xf16>, tensor<7x5x4xf16>
}
