// fusec fuzz: error at compile-fused
// detail: InternalPassError: internal error in pass 'fold-empty': ValueError: ('Invalid OpResult name format ``.', "Make sure names contain only characters of [A-Za-z0-9_$.-] and don't start with a number.") (pipeline.py:177)
// known: item 8 (zero-size dimensions)
// inputs: seed=1710 edges=no
// found by: python -m fusec.fuzz --seed 7001 (graph 1710)
func.func @f(%OvR: tensor<3x0xf32>) -> (tensor<3x0xf32>) {
  %_62 = nn.exp %OvR : tensor<3x0xf32>
  func.return %_62 : tensor<3x0xf32>
}
