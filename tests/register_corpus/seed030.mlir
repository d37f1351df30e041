func.func @f(%NJgt$jCfih7A9PpCvpmVzoFTtavRrchHj: tensor<6x5x2xf16>, %l_: tensor<5xf16>) -> (tensor<1x20x1x3xf16>, tensor<f16>) {
  %gP3SSt = nn.reshape %NJgt$jCfih7A9PpCvpmVzoFTtavRrchHj : (tensor<6x5x2xf16>) -> tensor<1x20x1x3xf16>
  %_Br6_s0N78zRBF = nn.reduce_mean %l_ {axes = [0], keepdims = false} : (tensor<5xf16>) -> tensor<f16>
  func.return %gP3SSt, %_Br6_s0N78zRBF : tensor<1x20x1x3xf16>, tensor<f16>
}
