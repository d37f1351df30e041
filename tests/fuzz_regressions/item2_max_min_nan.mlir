// fusec fuzz: mismatch at compare-fused
// detail: output 1: NaN at (1,): got np.float64(1.1441658735275269), reference np.float64(nan)
// known: item 2 (nn.max / nn.min drop a NaN depending on operand order)
// inputs: seed=2 edges=yes
// found by: written for issue 10 item 2; NaN from the edge inputs
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %x = nn.max %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = nn.min %b, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %x, %y : tensor<4xf32>, tensor<4xf32>
}
