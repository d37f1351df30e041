func.func @f(%BcQLX: tensor<f32>, %UlFkMEBLjDV8o1wA1nqxQ4rx4-ZL1pkRqRoH: tensor<3xf32>, %PoFWRSJ9hH7Bb.udl$waOcKPVgGI3awBKZ: tensor<1xf32>) -> (tensor<1xf32>, tensor<1xf32>) {
  %tpNfxq9aRt5yaQl34BEPqI-pKn0DZ0 = nn.reduce_sum %UlFkMEBLjDV8o1wA1nqxQ4rx4-ZL1pkRqRoH {axes = [0], keepdims = true} : (tensor<3xf32>) -> tensor<1xf32>
  %UmWn = nn.rms_norm %tpNfxq9aRt5yaQl34BEPqI-pKn0DZ0, %PoFWRSJ9hH7Bb.udl$waOcKPVgGI3awBKZ {axis = -1, epsilon = 1.0e-05} : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  func.return %UmWn, %UmWn : tensor<1xf32>, tensor<1xf32>
}
