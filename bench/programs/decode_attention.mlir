// One decode step of multi-head attention: 8 sequences x 32 heads, one new
// query each over a 4096-entry K/V cache, head dim 128. One block per head
// would be 256 blocks each streaming 4096 keys; split-KV runs a block per
// chunk of the keys and a small kernel combines the chunks (two launches;
// the 8x32x1x4096 scores never reach memory).
func.func @decode_attention(%q: tensor<8x32x1x128xf32>, %k: tensor<8x32x4096x128xf32>, %v: tensor<8x32x4096x128xf32>) -> tensor<8x32x1x128xf32> {
  %kt = nn.transpose %k {perm = [0, 1, 3, 2]} : (tensor<8x32x4096x128xf32>) -> tensor<8x32x128x4096xf32>
  %s = nn.matmul %q, %kt : (tensor<8x32x1x128xf32>, tensor<8x32x128x4096xf32>) -> tensor<8x32x1x4096xf32>
  %c = nn.constant dense<0.08838834764831845> : tensor<f32>
  %x = nn.mul %s, %c : (tensor<8x32x1x4096xf32>, tensor<f32>) -> tensor<8x32x1x4096xf32>
  %p = nn.softmax %x {axis = -1} : tensor<8x32x1x4096xf32>
  %o = nn.matmul %p, %v : (tensor<8x32x1x4096xf32>, tensor<8x32x4096x128xf32>) -> tensor<8x32x1x128xf32>
  func.return %o : tensor<8x32x1x128xf32>
}
