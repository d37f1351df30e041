// GPT-2's input embedding: token ids gather rows of the token table (a 50257-word
// vocabulary), learned positions are added, then a layer norm over the hidden axis.
// An indexed read of a table far larger than the rows it touches, feeding a row reduction.
func.func @embedding_layernorm(%ids: tensor<32x512xi64>, %wte: tensor<50257x768xf32>, %wpe: tensor<512x768xf32>, %gamma: tensor<768xf32>, %beta: tensor<768xf32>) -> tensor<32x512x768xf32> {
  %e = nn.gather %wte, %ids {axis = 0} : (tensor<50257x768xf32>, tensor<32x512xi64>) -> tensor<32x512x768xf32>
  %h = nn.add %e, %wpe : (tensor<32x512x768xf32>, tensor<512x768xf32>) -> tensor<32x512x768xf32>
  %y = nn.layer_norm %h, %gamma, %beta {axis = -1, epsilon = 1.0e-05} : (tensor<32x512x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<32x512x768xf32>
  func.return %y : tensor<32x512x768xf32>
}
