// GPT-2 transformer block: pre-LN causal self-attention and a tanh-GELU MLP, both with residuals (B1 S8 D32, 2 heads of 16); an example small enough to run in seconds in numba's CUDA simulator
func.func @gpt2_block(%x: tensor<1x8x32xf32>, %causal_mask: tensor<8x8xf32>, %ln1_g: tensor<32xf32>, %ln1_b: tensor<32xf32>, %w_qkv: tensor<32x96xf32>, %b_qkv: tensor<96xf32>, %w_out: tensor<32x32xf32>, %b_out: tensor<32xf32>, %ln2_g: tensor<32xf32>, %ln2_b: tensor<32xf32>, %w_fc: tensor<32x128xf32>, %b_fc: tensor<128xf32>, %w_proj: tensor<128x32xf32>, %b_proj: tensor<32xf32>) -> tensor<1x8x32xf32> {
  %0 = nn.layer_norm %x, %ln1_g, %ln1_b {axis = -1, epsilon = 1.0e-05} : (tensor<1x8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<1x8x32xf32>
  %1 = nn.matmul %0, %w_qkv : (tensor<1x8x32xf32>, tensor<32x96xf32>) -> tensor<1x8x96xf32>
  %2 = nn.add %1, %b_qkv : (tensor<1x8x96xf32>, tensor<96xf32>) -> tensor<1x8x96xf32>
  %3 = nn.slice %2 {starts = [0, 0, 0], limits = [1, 8, 32]} : (tensor<1x8x96xf32>) -> tensor<1x8x32xf32>
  %4 = nn.reshape %3 : (tensor<1x8x32xf32>) -> tensor<1x8x2x16xf32>
  %5 = nn.transpose %4 {perm = [0, 2, 1, 3]} : (tensor<1x8x2x16xf32>) -> tensor<1x2x8x16xf32>
  %6 = nn.slice %2 {starts = [0, 0, 32], limits = [1, 8, 64]} : (tensor<1x8x96xf32>) -> tensor<1x8x32xf32>
  %7 = nn.reshape %6 : (tensor<1x8x32xf32>) -> tensor<1x8x2x16xf32>
  %8 = nn.transpose %7 {perm = [0, 2, 1, 3]} : (tensor<1x8x2x16xf32>) -> tensor<1x2x8x16xf32>
  %9 = nn.slice %2 {starts = [0, 0, 64], limits = [1, 8, 96]} : (tensor<1x8x96xf32>) -> tensor<1x8x32xf32>
  %10 = nn.reshape %9 : (tensor<1x8x32xf32>) -> tensor<1x8x2x16xf32>
  %11 = nn.transpose %10 {perm = [0, 2, 1, 3]} : (tensor<1x8x2x16xf32>) -> tensor<1x2x8x16xf32>
  %12 = nn.transpose %8 {perm = [0, 1, 3, 2]} : (tensor<1x2x8x16xf32>) -> tensor<1x2x16x8xf32>
  %13 = nn.matmul %5, %12 : (tensor<1x2x8x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x8x8xf32>
  %14 = nn.constant dense<0.25> : tensor<f32>
  %15 = nn.mul %13, %14 : (tensor<1x2x8x8xf32>, tensor<f32>) -> tensor<1x2x8x8xf32>
  %16 = nn.add %15, %causal_mask : (tensor<1x2x8x8xf32>, tensor<8x8xf32>) -> tensor<1x2x8x8xf32>
  %17 = nn.softmax %16 {axis = -1} : tensor<1x2x8x8xf32>
  %18 = nn.matmul %17, %11 : (tensor<1x2x8x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x8x16xf32>
  %19 = nn.transpose %18 {perm = [0, 2, 1, 3]} : (tensor<1x2x8x16xf32>) -> tensor<1x8x2x16xf32>
  %20 = nn.reshape %19 : (tensor<1x8x2x16xf32>) -> tensor<1x8x32xf32>
  %21 = nn.matmul %20, %w_out : (tensor<1x8x32xf32>, tensor<32x32xf32>) -> tensor<1x8x32xf32>
  %22 = nn.add %21, %b_out : (tensor<1x8x32xf32>, tensor<32xf32>) -> tensor<1x8x32xf32>
  %23 = nn.add %22, %x : (tensor<1x8x32xf32>, tensor<1x8x32xf32>) -> tensor<1x8x32xf32>
  %24 = nn.layer_norm %23, %ln2_g, %ln2_b {axis = -1, epsilon = 1.0e-05} : (tensor<1x8x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<1x8x32xf32>
  %25 = nn.matmul %24, %w_fc : (tensor<1x8x32xf32>, tensor<32x128xf32>) -> tensor<1x8x128xf32>
  %26 = nn.add %25, %b_fc : (tensor<1x8x128xf32>, tensor<128xf32>) -> tensor<1x8x128xf32>
  %27 = nn.gelu %26 {approximate = "tanh"} : tensor<1x8x128xf32>
  %28 = nn.matmul %27, %w_proj : (tensor<1x8x128xf32>, tensor<128x32xf32>) -> tensor<1x8x32xf32>
  %29 = nn.add %28, %b_proj : (tensor<1x8x32xf32>, tensor<32xf32>) -> tensor<1x8x32xf32>
  %30 = nn.add %29, %23 : (tensor<1x8x32xf32>, tensor<1x8x32xf32>) -> tensor<1x8x32xf32>
  func.return %30 : tensor<1x8x32xf32>
}
