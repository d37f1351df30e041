// RUN: fusec %s --split-input-file --verify-diagnostics -p lower-to-numba

// The emitter obeys the attribute: online = 1 on a group without a softmax
// is an error, not a silent two-pass kernel.
func.func @bad_online(%x: tensor<8x4xf32>) -> tensor<1x4xf32> {
  // expected-error @+1 {{the schedule asks for online softmax statistics (online = 1), but the group has no max and sum of exps to share a pass}}
  %s = fusion.group (%x) {name = "g0", kind = "reduction", schedule = #fusion.reduction<layout = "column", row = "memory", lanes = 4, rows_per_block = 4, splits = 1, chunk = 0, per_lane = 0, cached = 0, unroll = 4, online = 1>} : (tensor<8x4xf32>) -> tensor<1x4xf32> {
  ^bb0(%a: tensor<8x4xf32>):
    %r = nn.reduce_sum %a {axes = [0], keepdims = true} : (tensor<8x4xf32>) -> tensor<1x4xf32>
    fusion.yield %r : tensor<1x4xf32>
  }
  func.return %s : tensor<1x4xf32>
}

// -----

// Split passes (splits > 1 with a final pass) need ONE pass of statistics:
// a layer-norm-style group (mean, then the variance of the centred values)
// cannot combine per-block partials of its second pass in two kernels.
func.func @bad_split(%x: tensor<64x4xf32>) -> tensor<64x4xf32> {
  // expected-error @+1 {{the schedule splits the rows over 4 blocks, but this group has more than one pass of statistics (or a row cache): only one pass (or an online softmax) splits}}
  %y = fusion.group (%x) {name = "g0", kind = "reduction", schedule = #fusion.reduction<layout = "column", row = "memory", lanes = 4, rows_per_block = 4, splits = 4, chunk = 16, per_lane = 0, cached = 0, unroll = 4, online = 0>} : (tensor<64x4xf32>) -> tensor<64x4xf32> {
  ^bb0(%a: tensor<64x4xf32>):
    %m = nn.reduce_mean %a {axes = [0], keepdims = true} : (tensor<64x4xf32>) -> tensor<1x4xf32>
    %d = nn.sub %a, %m : (tensor<64x4xf32>, tensor<1x4xf32>) -> tensor<64x4xf32>
    %q = nn.mul %d, %d : (tensor<64x4xf32>, tensor<64x4xf32>) -> tensor<64x4xf32>
    %v = nn.reduce_mean %q {axes = [0], keepdims = true} : (tensor<64x4xf32>) -> tensor<1x4xf32>
    %n = nn.div %d, %v : (tensor<64x4xf32>, tensor<1x4xf32>) -> tensor<64x4xf32>
    fusion.yield %n : tensor<64x4xf32>
  }
  func.return %y : tensor<64x4xf32>
}
