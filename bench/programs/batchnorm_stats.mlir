// BatchNorm training statistics of an NHWC activation (N*H*W = 64*56*56 rows,
// 256 channels), written as two separate reductions: the per-channel sum and
// sum of squares, one kernel reading x once.
func.func @batchnorm_stats(%x: tensor<200704x256xf32>) -> (tensor<256xf32>, tensor<256xf32>) {
  %s = nn.reduce_sum %x {axes = [0]} : (tensor<200704x256xf32>) -> tensor<256xf32>
  %sq = nn.mul %x, %x : (tensor<200704x256xf32>, tensor<200704x256xf32>) -> tensor<200704x256xf32>
  %q = nn.reduce_sum %sq {axes = [0]} : (tensor<200704x256xf32>) -> tensor<256xf32>
  func.return %s, %q : tensor<256xf32>, tensor<256xf32>
}
