// GPT-2 block scaled down for the launch-path benchmark (bench/launch_path.py):
// bench/models/gpt2_block.mlir at B1 S64 D256 with 4 heads of 64 (was B8 S512 D768, 12 heads).
func.func @gpt2_block_small(%x: tensor<1x64x256xf32>, %causal_mask: tensor<64x64xf32>, %ln1_g: tensor<256xf32>, %ln1_b: tensor<256xf32>, %w_qkv: tensor<256x768xf32>, %b_qkv: tensor<768xf32>, %w_out: tensor<256x256xf32>, %b_out: tensor<256xf32>, %ln2_g: tensor<256xf32>, %ln2_b: tensor<256xf32>, %w_fc: tensor<256x1024xf32>, %b_fc: tensor<1024xf32>, %w_proj: tensor<1024x256xf32>, %b_proj: tensor<256xf32>) -> tensor<1x64x256xf32> {
  %0 = nn.layer_norm %x, %ln1_g, %ln1_b {axis = -1, epsilon = 1.0e-05} : (tensor<1x64x256xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<1x64x256xf32>
  %1 = nn.matmul %0, %w_qkv : (tensor<1x64x256xf32>, tensor<256x768xf32>) -> tensor<1x64x768xf32>
  %2 = nn.add %1, %b_qkv : (tensor<1x64x768xf32>, tensor<768xf32>) -> tensor<1x64x768xf32>
  %3 = nn.slice %2 {starts = [0, 0, 0], limits = [1, 64, 256]} : (tensor<1x64x768xf32>) -> tensor<1x64x256xf32>
  %4 = nn.reshape %3 : (tensor<1x64x256xf32>) -> tensor<1x64x4x64xf32>
  %5 = nn.transpose %4 {perm = [0, 2, 1, 3]} : (tensor<1x64x4x64xf32>) -> tensor<1x4x64x64xf32>
  %6 = nn.slice %2 {starts = [0, 0, 256], limits = [1, 64, 512]} : (tensor<1x64x768xf32>) -> tensor<1x64x256xf32>
  %7 = nn.reshape %6 : (tensor<1x64x256xf32>) -> tensor<1x64x4x64xf32>
  %8 = nn.transpose %7 {perm = [0, 2, 1, 3]} : (tensor<1x64x4x64xf32>) -> tensor<1x4x64x64xf32>
  %9 = nn.slice %2 {starts = [0, 0, 512], limits = [1, 64, 768]} : (tensor<1x64x768xf32>) -> tensor<1x64x256xf32>
  %10 = nn.reshape %9 : (tensor<1x64x256xf32>) -> tensor<1x64x4x64xf32>
  %11 = nn.transpose %10 {perm = [0, 2, 1, 3]} : (tensor<1x64x4x64xf32>) -> tensor<1x4x64x64xf32>
  %12 = nn.transpose %8 {perm = [0, 1, 3, 2]} : (tensor<1x4x64x64xf32>) -> tensor<1x4x64x64xf32>
  %13 = nn.matmul %5, %12 : (tensor<1x4x64x64xf32>, tensor<1x4x64x64xf32>) -> tensor<1x4x64x64xf32>
  %14 = nn.constant dense<0.125> : tensor<f32>
  %15 = nn.mul %13, %14 : (tensor<1x4x64x64xf32>, tensor<f32>) -> tensor<1x4x64x64xf32>
  %16 = nn.add %15, %causal_mask : (tensor<1x4x64x64xf32>, tensor<64x64xf32>) -> tensor<1x4x64x64xf32>
  %17 = nn.softmax %16 {axis = -1} : tensor<1x4x64x64xf32>
  %18 = nn.matmul %17, %11 : (tensor<1x4x64x64xf32>, tensor<1x4x64x64xf32>) -> tensor<1x4x64x64xf32>
  %19 = nn.transpose %18 {perm = [0, 2, 1, 3]} : (tensor<1x4x64x64xf32>) -> tensor<1x64x4x64xf32>
  %20 = nn.reshape %19 : (tensor<1x64x4x64xf32>) -> tensor<1x64x256xf32>
  %21 = nn.matmul %20, %w_out : (tensor<1x64x256xf32>, tensor<256x256xf32>) -> tensor<1x64x256xf32>
  %22 = nn.add %21, %b_out : (tensor<1x64x256xf32>, tensor<256xf32>) -> tensor<1x64x256xf32>
  %23 = nn.add %22, %x : (tensor<1x64x256xf32>, tensor<1x64x256xf32>) -> tensor<1x64x256xf32>
  %24 = nn.layer_norm %23, %ln2_g, %ln2_b {axis = -1, epsilon = 1.0e-05} : (tensor<1x64x256xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<1x64x256xf32>
  %25 = nn.matmul %24, %w_fc : (tensor<1x64x256xf32>, tensor<256x1024xf32>) -> tensor<1x64x1024xf32>
  %26 = nn.add %25, %b_fc : (tensor<1x64x1024xf32>, tensor<1024xf32>) -> tensor<1x64x1024xf32>
  %27 = nn.gelu %26 {approximate = "tanh"} : tensor<1x64x1024xf32>
  %28 = nn.matmul %27, %w_proj : (tensor<1x64x1024xf32>, tensor<1024x256xf32>) -> tensor<1x64x256xf32>
  %29 = nn.add %28, %b_proj : (tensor<1x64x256xf32>, tensor<256xf32>) -> tensor<1x64x256xf32>
  %30 = nn.add %29, %23 : (tensor<1x64x256xf32>, tensor<1x64x256xf32>) -> tensor<1x64x256xf32>
  func.return %30 : tensor<1x64x256xf32>
}
