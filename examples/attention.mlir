// Scaled dot-product attention with an additive mask (B1 H2 S16 D8); an example small enough to run in seconds in numba's CUDA simulator
func.func @attention(%q: tensor<1x2x16x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %mask: tensor<16x16xf32>) -> tensor<1x2x16x8xf32> {
  %0 = nn.transpose %k {perm = [0, 1, 3, 2]} : (tensor<1x2x16x8xf32>) -> tensor<1x2x8x16xf32>
  %1 = nn.matmul %q, %0 : (tensor<1x2x16x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x16x16xf32>
  %2 = nn.constant dense<0.35355339> : tensor<f32>
  %3 = nn.mul %1, %2 : (tensor<1x2x16x16xf32>, tensor<f32>) -> tensor<1x2x16x16xf32>
  %4 = nn.add %3, %mask : (tensor<1x2x16x16xf32>, tensor<16x16xf32>) -> tensor<1x2x16x16xf32>
  %5 = nn.softmax %4 {axis = -1} : tensor<1x2x16x16xf32>
  %6 = nn.matmul %5, %v : (tensor<1x2x16x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
  func.return %6 : tensor<1x2x16x8xf32>
}
