// Rotary position embedding (rotate-half form, as Llama applies it) on q and k:
// each head vector's halves are rotated by the position's cos and sin and the
// halves concatenated again. One kernel: the concats evaluate their computed
// operands under a select on the head-dim coordinate (docs/fusion.md).
func.func @rope(%q: tensor<4x1024x32x128xf32>, %k: tensor<4x1024x32x128xf32>, %cos: tensor<1024x64xf32>, %sin: tensor<1024x64xf32>) -> (tensor<4x1024x32x128xf32>, tensor<4x1024x32x128xf32>) {
  %c3 = nn.reshape %cos : (tensor<1024x64xf32>) -> tensor<1024x1x64xf32>
  %s3 = nn.reshape %sin : (tensor<1024x64xf32>) -> tensor<1024x1x64xf32>
  %q1 = nn.slice %q {starts = [0, 0, 0, 0], limits = [4, 1024, 32, 64]} : (tensor<4x1024x32x128xf32>) -> tensor<4x1024x32x64xf32>
  %q2 = nn.slice %q {starts = [0, 0, 0, 64], limits = [4, 1024, 32, 128]} : (tensor<4x1024x32x128xf32>) -> tensor<4x1024x32x64xf32>
  %qa = nn.mul %q1, %c3 : (tensor<4x1024x32x64xf32>, tensor<1024x1x64xf32>) -> tensor<4x1024x32x64xf32>
  %qb = nn.mul %q2, %s3 : (tensor<4x1024x32x64xf32>, tensor<1024x1x64xf32>) -> tensor<4x1024x32x64xf32>
  %qlo = nn.sub %qa, %qb : (tensor<4x1024x32x64xf32>, tensor<4x1024x32x64xf32>) -> tensor<4x1024x32x64xf32>
  %qc = nn.mul %q2, %c3 : (tensor<4x1024x32x64xf32>, tensor<1024x1x64xf32>) -> tensor<4x1024x32x64xf32>
  %qd = nn.mul %q1, %s3 : (tensor<4x1024x32x64xf32>, tensor<1024x1x64xf32>) -> tensor<4x1024x32x64xf32>
  %qhi = nn.add %qc, %qd : (tensor<4x1024x32x64xf32>, tensor<4x1024x32x64xf32>) -> tensor<4x1024x32x64xf32>
  %qo = nn.concat %qlo, %qhi {axis = 3} : (tensor<4x1024x32x64xf32>, tensor<4x1024x32x64xf32>) -> tensor<4x1024x32x128xf32>
  %k1 = nn.slice %k {starts = [0, 0, 0, 0], limits = [4, 1024, 32, 64]} : (tensor<4x1024x32x128xf32>) -> tensor<4x1024x32x64xf32>
  %k2 = nn.slice %k {starts = [0, 0, 0, 64], limits = [4, 1024, 32, 128]} : (tensor<4x1024x32x128xf32>) -> tensor<4x1024x32x64xf32>
  %ka = nn.mul %k1, %c3 : (tensor<4x1024x32x64xf32>, tensor<1024x1x64xf32>) -> tensor<4x1024x32x64xf32>
  %kb = nn.mul %k2, %s3 : (tensor<4x1024x32x64xf32>, tensor<1024x1x64xf32>) -> tensor<4x1024x32x64xf32>
  %klo = nn.sub %ka, %kb : (tensor<4x1024x32x64xf32>, tensor<4x1024x32x64xf32>) -> tensor<4x1024x32x64xf32>
  %kc = nn.mul %k2, %c3 : (tensor<4x1024x32x64xf32>, tensor<1024x1x64xf32>) -> tensor<4x1024x32x64xf32>
  %kd = nn.mul %k1, %s3 : (tensor<4x1024x32x64xf32>, tensor<1024x1x64xf32>) -> tensor<4x1024x32x64xf32>
  %khi = nn.add %kc, %kd : (tensor<4x1024x32x64xf32>, tensor<4x1024x32x64xf32>) -> tensor<4x1024x32x64xf32>
  %ko = nn.concat %klo, %khi {axis = 3} : (tensor<4x1024x32x64xf32>, tensor<4x1024x32x64xf32>) -> tensor<4x1024x32x128xf32>
  func.return %qo, %ko : tensor<4x1024x32x128xf32>, tensor<4x1024x32x128xf32>
}
