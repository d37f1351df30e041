// Grouped-query attention (Llama/Mistral): 32 query heads share 8 key/value
// heads, each K/V head repeated over a group of 4 (`repeat_kv`: reshape,
// broadcast_to, reshape). `unmerge-broadcasts` runs the attention on
// [B, Hkv, G, S, D] with K and V broadcast along G, so the whole program is one
// kernel reading each K/V head in place; without it two copy kernels write
// the repeated K and V (4x32x1024x128, 64 MiB each) first.
func.func @gqa_attention(%q: tensor<4x32x1024x128xf32>, %k: tensor<4x8x1024x128xf32>, %v: tensor<4x8x1024x128xf32>) -> tensor<4x32x1024x128xf32> {
  %k1 = nn.reshape %k : (tensor<4x8x1024x128xf32>) -> tensor<4x8x1x1024x128xf32>
  %k2 = nn.broadcast_to %k1 : (tensor<4x8x1x1024x128xf32>) -> tensor<4x8x4x1024x128xf32>
  %k3 = nn.reshape %k2 : (tensor<4x8x4x1024x128xf32>) -> tensor<4x32x1024x128xf32>
  %v1 = nn.reshape %v : (tensor<4x8x1024x128xf32>) -> tensor<4x8x1x1024x128xf32>
  %v2 = nn.broadcast_to %v1 : (tensor<4x8x1x1024x128xf32>) -> tensor<4x8x4x1024x128xf32>
  %v3 = nn.reshape %v2 : (tensor<4x8x4x1024x128xf32>) -> tensor<4x32x1024x128xf32>
  %kt = nn.transpose %k3 {perm = [0, 1, 3, 2]} : (tensor<4x32x1024x128xf32>) -> tensor<4x32x128x1024xf32>
  %s = nn.matmul %q, %kt : (tensor<4x32x1024x128xf32>, tensor<4x32x128x1024xf32>) -> tensor<4x32x1024x1024xf32>
  %c = nn.constant dense<0.08838834764831845> : tensor<f32>
  %x = nn.mul %s, %c : (tensor<4x32x1024x1024xf32>, tensor<f32>) -> tensor<4x32x1024x1024xf32>
  %p = nn.softmax %x {axis = -1} : tensor<4x32x1024x1024xf32>
  %o = nn.matmul %p, %v3 : (tensor<4x32x1024x1024xf32>, tensor<4x32x1024x128xf32>) -> tensor<4x32x1024x128xf32>
  func.return %o : tensor<4x32x1024x128xf32>
}
