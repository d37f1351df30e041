// fusec fuzz: error at reference
// detail: ValueError: zero-size array to reduction operation maximum which has no identity (fromnumeric.py:83)
// known: item 8 (zero-size dimensions)
// inputs: seed=446 edges=yes
// found by: python -m fusec.fuzz --seed 7001 (graph 446)
func.func @f(%v1: tensor<3x0x0xf16>) -> (tensor<3x0x1xf16>) {
  %v6 = nn.reduce_max %v1 {axes = [2], keepdims = true} : (tensor<3x0x0xf16>) -> tensor<3x0x1xf16>
  func.return %v6 : tensor<3x0x1xf16>
}
