// Residual add, layer norm over the last axis, exact GELU; an example small enough to run in seconds in numba's CUDA simulator
func.func @add_layernorm_gelu(%a: tensor<8x64xf32>, %residual: tensor<8x64xf32>, %gamma: tensor<64xf32>, %beta: tensor<64xf32>) -> tensor<8x64xf32> {
  %0 = nn.add %a, %residual : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  %1 = nn.layer_norm %0, %gamma, %beta {axis = -1, epsilon = 1.0e-05} : (tensor<8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  %2 = nn.gelu %1 {approximate = "none"} : tensor<8x64xf32>
  func.return %2 : tensor<8x64xf32>
}
