// Group norm (32 groups of 16 channels) written out of primitive ops, then silu:
// a reduction over three trailing axes with two passes and a broadcast epilogue.
func.func @group_norm_silu(%x: tensor<16x32x16x32x32xf32>) -> tensor<16x32x16x32x32xf32> {
  %m = nn.reduce_mean %x {axes = [2, 3, 4], keepdims = true} : (tensor<16x32x16x32x32xf32>) -> tensor<16x32x1x1x1xf32>
  %d = nn.sub %x, %m : (tensor<16x32x16x32x32xf32>, tensor<16x32x1x1x1xf32>) -> tensor<16x32x16x32x32xf32>
  %q = nn.mul %d, %d : (tensor<16x32x16x32x32xf32>, tensor<16x32x16x32x32xf32>) -> tensor<16x32x16x32x32xf32>
  %v = nn.reduce_mean %q {axes = [2, 3, 4], keepdims = true} : (tensor<16x32x16x32x32xf32>) -> tensor<16x32x1x1x1xf32>
  %e = nn.constant dense<1.0e-05> : tensor<f32>
  %ve = nn.add %v, %e : (tensor<16x32x1x1x1xf32>, tensor<f32>) -> tensor<16x32x1x1x1xf32>
  %r = nn.rsqrt %ve : tensor<16x32x1x1x1xf32>
  %y = nn.mul %d, %r : (tensor<16x32x16x32x32xf32>, tensor<16x32x1x1x1xf32>) -> tensor<16x32x16x32x32xf32>
  %o = nn.silu %y : tensor<16x32x16x32x32xf32>
  func.return %o : tensor<16x32x16x32x32xf32>
}
