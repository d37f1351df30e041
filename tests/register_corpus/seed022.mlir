func.func @f(%v0: tensor<3x12xf32>, %v1: tensor<1xf32>) -> (tensor<3x12xi1>) {
  %v2 = nn.cmp %v1, %v0 {predicate = "lt"} : (tensor<1xf32>, tensor<3x12xf32>) -> tensor<3x12xi1>
  func.return %v2 : tensor<3x12xi1>
}
