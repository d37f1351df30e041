func.func @transposed_add(%x: tensor<8192x8192xf32>, %y: tensor<8192x8192xf32>) -> tensor<8192x8192xf32> {
  %t = nn.transpose %x {perm = [1, 0]} : (tensor<8192x8192xf32>) -> tensor<8192x8192xf32>
  %s = nn.add %t, %y : (tensor<8192x8192xf32>, tensor<8192x8192xf32>) -> tensor<8192x8192xf32>
  %r = nn.relu %s : tensor<8192x8192xf32>
  func.return %r : tensor<8192x8192xf32>
}
