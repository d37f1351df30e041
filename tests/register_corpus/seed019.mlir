func.func @RVY0(%v0: tensor<12x5xf32>, %v1: tensor<12x5xf32>) -> (tensor<12x5xf32>, tensor<5x12xf32>) {
  %v2 = nn.mul %v0, %v1 : (tensor<12x5xf32>, tensor<12x5xf32>) -> tensor<12x5xf32>
  %v3 = nn.min %v2, %v2 : (tensor<12x5xf32>, tensor<12x5xf32>) -> tensor<12x5xf32>
  %v4 = nn.transpose %v1 {perm = [1, 0]} : (tensor<12x5xf32>) -> tensor<5x12xf32>
  func.return %v3, %v4 : tensor<12x5xf32>, tensor<5x12xf32>
}
