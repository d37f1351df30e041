// Encoder-decoder cross-attention with head dim 128: 256 decoder queries attend
// to 1024 encoder keys under a per-sequence padding mask (broadcast over heads
// and queries). Softmax and both products are one kernel on tensor cores; the
// scores (4x16x256x1024) never reach memory.
func.func @cross_attention_d128(%q: tensor<4x16x256x128xf32>, %k: tensor<4x16x1024x128xf32>, %v: tensor<4x16x1024x128xf32>, %pad: tensor<4x1x1x1024xf32>) -> tensor<4x16x256x128xf32> {
  %kt = nn.transpose %k {perm = [0, 1, 3, 2]} : (tensor<4x16x1024x128xf32>) -> tensor<4x16x128x1024xf32>
  %s = nn.matmul %q, %kt : (tensor<4x16x256x128xf32>, tensor<4x16x128x1024xf32>) -> tensor<4x16x256x1024xf32>
  %c = nn.constant dense<0.08838834764831845> : tensor<f32>
  %x = nn.mul %s, %c : (tensor<4x16x256x1024xf32>, tensor<f32>) -> tensor<4x16x256x1024xf32>
  %xm = nn.add %x, %pad : (tensor<4x16x256x1024xf32>, tensor<4x1x1x1024xf32>) -> tensor<4x16x256x1024xf32>
  %p = nn.softmax %xm {axis = -1} : tensor<4x16x256x1024xf32>
  %o = nn.matmul %p, %v : (tensor<4x16x256x1024xf32>, tensor<4x16x1024x128xf32>) -> tensor<4x16x256x128xf32>
  func.return %o : tensor<4x16x256x128xf32>
}
