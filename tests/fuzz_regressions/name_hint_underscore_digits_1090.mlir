// fusec fuzz: error at compile-fused
// detail: InternalPassError: internal error in pass 'group-each-op': ValueError: ('Invalid OpResult name format ``.', "Make sure names contain only characters of [A-Za-z0-9_$.-] and don't start with a number.") (pipeline.py:177)
// known: no
// inputs: seed=1090 edges=no
// found by: python -m fusec.fuzz --seed 7001 (graph 1090)
func.func @f(%gt0xjr7gEHlV_wD_OiXB.v: tensor<1xf16>) -> (tensor<1xf16>) {
  %_3 = nn.relu %gt0xjr7gEHlV_wD_OiXB.v : tensor<1xf16>
  func.return %_3 : tensor<1xf16>
}
