// fusec fuzz: error at compile-fused
// detail: InternalPassError: internal error in pass 'form-fusion-groups': TypeError: '<' not supported between instances of 'NoneType' and 'float' (pipeline.py:83)
// known: item 5 (check-precision with an i1 output: TypeError)
// inputs: seed=2 edges=no
// found by: python -m fusec.fuzz --seed 100 (graph 2), minimized
func.func @f(%v0: tensor<2x3x1x3xf16>, %v1: tensor<3xf16>, %v2: tensor<3xi1>, %v3: tensor<3xf16>) -> (tensor<2x3x1x3xi1>, tensor<2x3x1x1xf16>) {
  %v4 = nn.silu %v0 : tensor<2x3x1x3xf16>
  %v5 = nn.select %v2, %v3, %v1 : (tensor<3xi1>, tensor<3xf16>, tensor<3xf16>) -> tensor<3xf16>
  %v6 = nn.cmp %v4, %v5 {predicate = "gt"} : (tensor<2x3x1x3xf16>, tensor<3xf16>) -> tensor<2x3x1x3xi1>
  %v7 = nn.avg_pool2d %v4 {kernel = [1, 3], strides = [2, 2], pads = [0, 0, 0, 0]} : (tensor<2x3x1x3xf16>) -> tensor<2x3x1x1xf16>
  func.return %v6, %v7 : tensor<2x3x1x3xi1>, tensor<2x3x1x1xf16>
}
