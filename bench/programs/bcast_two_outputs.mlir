func.func @bcast_two_outputs(%x: tensor<8192x8192xf32>, %row: tensor<8192xf32>, %col: tensor<8192x1xf32>) -> (tensor<8192x8192xf32>, tensor<8192x8192xf32>) {
  %0 = nn.mul %x, %row : (tensor<8192x8192xf32>, tensor<8192xf32>) -> tensor<8192x8192xf32>
  %1 = nn.add %0, %col : (tensor<8192x8192xf32>, tensor<8192x1xf32>) -> tensor<8192x8192xf32>
  %2 = nn.tanh %1 : tensor<8192x8192xf32>
  %3 = nn.mul %2, %row : (tensor<8192x8192xf32>, tensor<8192xf32>) -> tensor<8192x8192xf32>
  func.return %1, %3 : tensor<8192x8192xf32>, tensor<8192x8192xf32>
}
