// NCHW activations to NHWC with a per-channel bias and gelu (a layout change
// fused with its epilogue): a transposed operand and a broadcast together.
func.func @nchw_to_nhwc_bias_gelu(%x: tensor<32x64x56x56xf32>, %b: tensor<64xf32>) -> tensor<32x56x56x64xf32> {
  %t = nn.transpose %x {perm = [0, 2, 3, 1]} : (tensor<32x64x56x56xf32>) -> tensor<32x56x56x64xf32>
  %a = nn.add %t, %b : (tensor<32x56x56x64xf32>, tensor<64xf32>) -> tensor<32x56x56x64xf32>
  %y = nn.gelu %a : tensor<32x56x56x64xf32>
  func.return %y : tensor<32x56x56x64xf32>
}
