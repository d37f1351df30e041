// fusec fuzz: mismatch at compare-fused
// detail: output 0: NaN at (0, 0, 1, 0): got np.float64(0.28121066093444824), reference np.float64(nan)
// known: no
// inputs: seed=2 edges=yes
// found by: python -m fusec.fuzz --seed 200 (graph 12), written smaller
func.func @f(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32> {
  %y = nn.max_pool2d %x {kernel = [2, 2], strides = [2, 2]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  func.return %y : tensor<1x2x2x2xf32>
}
