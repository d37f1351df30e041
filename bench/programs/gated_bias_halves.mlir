// A GLU-style gate: a bias added to a projection's output, split in two
// halves with slices, one half gating the other through silu. Nothing but
// the slices reads the biased value, so the add can be evaluated where each
// half is read instead of being written once and read back.
func.func @gated_bias_halves(%x: tensor<8192x4096xf32>, %b: tensor<4096xf32>) -> tensor<8192x2048xf32> {
  %h = nn.add %x, %b : (tensor<8192x4096xf32>, tensor<4096xf32>) -> tensor<8192x4096xf32>
  %a = nn.slice %h {starts = [0, 0], limits = [8192, 2048]} : (tensor<8192x4096xf32>) -> tensor<8192x2048xf32>
  %g = nn.slice %h {starts = [0, 2048], limits = [8192, 4096]} : (tensor<8192x4096xf32>) -> tensor<8192x2048xf32>
  %s = nn.silu %g : tensor<8192x2048xf32>
  %y = nn.mul %a, %s : (tensor<8192x2048xf32>, tensor<8192x2048xf32>) -> tensor<8192x2048xf32>
  func.return %y : tensor<8192x2048xf32>
}
