// fusec fuzz: rejected at compile-fused
// detail: nn.conv2d cannot be evaluated inside this fused kernel
// known: no (conv + pool fused although the conv result is also returned; codegen/conv_pool.py writes only the pool)
// inputs: seed=0 edges=no
// found by: tests/test_fuzz.py slice (seed 2026, graph 4), minimized
func.func @f(%v0: tensor<1x1x4x1xf32>, %v1: tensor<1x1x2x2xf32>) -> (tensor<1x1x2x1xf32>, tensor<1x1x2x1xf32>) {
  %v3 = nn.conv2d %v0, %v1 {strides = [2, 2], pads = [1, 1, 1, 1], dilations = [2, 1], groups = 1} : (tensor<1x1x4x1xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x1xf32>
  %v5 = nn.avg_pool2d %v3 {kernel = [2, 1], strides = [2, 2], pads = [1, 0, 1, 0]} : (tensor<1x1x2x1xf32>) -> tensor<1x1x2x1xf32>
  func.return %v5, %v3 : tensor<1x1x2x1xf32>, tensor<1x1x2x1xf32>
}
