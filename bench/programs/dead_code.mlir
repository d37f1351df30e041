func.func @dead_code(%x: tensor<8192x8192xf32>, %y: tensor<8192x8192xf32>) -> tensor<8192x8192xf32> {
  %unused = nn.tanh %x : tensor<8192x8192xf32>
  %a = nn.mul %x, %y : (tensor<8192x8192xf32>, tensor<8192x8192xf32>) -> tensor<8192x8192xf32>
  %b = nn.mul %x, %y : (tensor<8192x8192xf32>, tensor<8192x8192xf32>) -> tensor<8192x8192xf32>
  %dead = nn.exp %a : tensor<8192x8192xf32>
  %dead2 = nn.add %dead, %y : (tensor<8192x8192xf32>, tensor<8192x8192xf32>) -> tensor<8192x8192xf32>
  %s = nn.add %a, %b : (tensor<8192x8192xf32>, tensor<8192x8192xf32>) -> tensor<8192x8192xf32>
  %r = nn.sigmoid %s : tensor<8192x8192xf32>
  func.return %r : tensor<8192x8192xf32>
}
