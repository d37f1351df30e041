func.func @f(%v0: tensor<5x6xf16>, %v1: tensor<5x6xi1>, %v2: tensor<5x6xf16>, %v3: tensor<6xf16>, %v4: tensor<4x10xf16>, %v5: tensor<4x10xf16>) -> (tensor<5x6xi1>, tensor<5x6xi1>, tensor<5x6xf16>, tensor<4x10xf16>) {
  %v6 = nn.log_softmax %v0 {axis = -2} : tensor<5x6xf16>
  %v7 = nn.mul %v6, %v6 : (tensor<5x6xf16>, tensor<5x6xf16>) -> tensor<5x6xf16>
  %v8 = nn.select %v1, %v7, %v7 : (tensor<5x6xi1>, tensor<5x6xf16>, tensor<5x6xf16>) -> tensor<5x6xf16>
  %v9 = nn.cmp %v7, %v7 {predicate = "gt"} : (tensor<5x6xf16>, tensor<5x6xf16>) -> tensor<5x6xi1>
  %v10 = nn.cmp %v7, %v2 {predicate = "lt"} : (tensor<5x6xf16>, tensor<5x6xf16>) -> tensor<5x6xi1>
  %v11 = nn.transpose %v9 {perm = [0, 1]} : (tensor<5x6xi1>) -> tensor<5x6xi1>
  %v12 = nn.min %v3, %v7 : (tensor<6xf16>, tensor<5x6xf16>) -> tensor<5x6xf16>
  %v13 = nn.pow %v4, %v5 : (tensor<4x10xf16>, tensor<4x10xf16>) -> tensor<4x10xf16>
  func.return %v10, %v11, %v12, %v13 : tensor<5x6xi1>, tensor<5x6xi1>, tensor<5x6xf16>, tensor<4x10xf16>
}
