// fusec fuzz: error at run-fused
// detail: ValueError: cannot reshape array of size 0 into shape (1,) (devicearray.py:207)
// known: item 8 (zero-size dimensions)
// inputs: seed=0 edges=no
// found by: issue 10 item 8
func.func @f(%a: tensor<0x3xf32>) -> tensor<3xf32> {
  %s = nn.reduce_sum %a {axes = [0]} : (tensor<0x3xf32>) -> tensor<3xf32>
  func.return %s : tensor<3xf32>
}
