// fusec fuzz: mismatch at compare-fused
// detail: output 0: NaN at (0,): got np.float64(1.7997074127197266), reference np.float64(nan)
// known: no
// inputs: seed=2 edges=yes
// found by: python -m fusec.fuzz --seed 200 (graph 12), written smaller
func.func @f(%x: tensor<3x8xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %y = nn.reduce_max %x {axes = [1]} : (tensor<3x8xf32>) -> tensor<3xf32>
  %z = nn.reduce_min %x {axes = [1]} : (tensor<3x8xf32>) -> tensor<3xf32>
  func.return %y, %z : tensor<3xf32>, tensor<3xf32>
}
