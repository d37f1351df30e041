// RMSNorm written out of primitives, then a SwiGLU gate on two halves of a
// projection (a LLaMA-style MLP input): row reduction, broadcasts, slices.
func.func @rmsnorm_swiglu(%x: tensor<8192x2048xf32>, %w: tensor<2048xf32>, %h: tensor<8192x4096xf32>) -> (tensor<8192x2048xf32>, tensor<8192x2048xf32>) {
  %sq = nn.mul %x, %x : (tensor<8192x2048xf32>, tensor<8192x2048xf32>) -> tensor<8192x2048xf32>
  %ms = nn.reduce_mean %sq {axes = [1], keepdims = true} : (tensor<8192x2048xf32>) -> tensor<8192x1xf32>
  %eps = nn.constant dense<1.0e-06> : tensor<f32>
  %v = nn.add %ms, %eps : (tensor<8192x1xf32>, tensor<f32>) -> tensor<8192x1xf32>
  %r = nn.rsqrt %v : tensor<8192x1xf32>
  %n = nn.mul %x, %r : (tensor<8192x2048xf32>, tensor<8192x1xf32>) -> tensor<8192x2048xf32>
  %y = nn.mul %n, %w : (tensor<8192x2048xf32>, tensor<2048xf32>) -> tensor<8192x2048xf32>
  %a = nn.slice %h {starts = [0, 0], limits = [8192, 2048], strides = [1, 1]} : (tensor<8192x4096xf32>) -> tensor<8192x2048xf32>
  %b = nn.slice %h {starts = [0, 2048], limits = [8192, 4096], strides = [1, 1]} : (tensor<8192x4096xf32>) -> tensor<8192x2048xf32>
  %sa = nn.silu %a : tensor<8192x2048xf32>
  %g = nn.mul %sa, %b : (tensor<8192x2048xf32>, tensor<8192x2048xf32>) -> tensor<8192x2048xf32>
  func.return %y, %g : tensor<8192x2048xf32>, tensor<8192x2048xf32>
}
