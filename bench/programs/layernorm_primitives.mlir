func.func @layernorm_primitives(%x: tensor<16384x4096xf32>, %g: tensor<4096xf32>, %b: tensor<4096xf32>) -> tensor<16384x4096xf32> {
  %m = nn.reduce_mean %x {axes = [1], keepdims = true} : (tensor<16384x4096xf32>) -> tensor<16384x1xf32>
  %d = nn.sub %x, %m : (tensor<16384x4096xf32>, tensor<16384x1xf32>) -> tensor<16384x4096xf32>
  %sq = nn.mul %d, %d : (tensor<16384x4096xf32>, tensor<16384x4096xf32>) -> tensor<16384x4096xf32>
  %v = nn.reduce_mean %sq {axes = [1], keepdims = true} : (tensor<16384x4096xf32>) -> tensor<16384x1xf32>
  %eps = nn.constant dense<1.0e-05> : tensor<f32>
  %ve = nn.add %v, %eps : (tensor<16384x1xf32>, tensor<f32>) -> tensor<16384x1xf32>
  %r = nn.rsqrt %ve : tensor<16384x1xf32>
  %n = nn.mul %d, %r : (tensor<16384x4096xf32>, tensor<16384x1xf32>) -> tensor<16384x4096xf32>
  %s = nn.mul %n, %g : (tensor<16384x4096xf32>, tensor<4096xf32>) -> tensor<16384x4096xf32>
  %y = nn.add %s, %b : (tensor<16384x4096xf32>, tensor<4096xf32>) -> tensor<16384x4096xf32>
  func.return %y : tensor<16384x4096xf32>
}
