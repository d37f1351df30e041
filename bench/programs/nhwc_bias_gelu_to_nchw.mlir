// A per-channel bias and gelu on NHWC activations, handed on in NCHW (the
// layout change after the epilogue, not before it): the transpose of an
// elementwise result, which moves onto the operands (sink-transposes).
func.func @nhwc_bias_gelu_to_nchw(%x: tensor<32x56x56x64xf32>, %b: tensor<64xf32>) -> tensor<32x64x56x56xf32> {
  %a = nn.add %x, %b : (tensor<32x56x56x64xf32>, tensor<64xf32>) -> tensor<32x56x56x64xf32>
  %y = nn.gelu %a : tensor<32x56x56x64xf32>
  %t = nn.transpose %y {perm = [0, 3, 1, 2]} : (tensor<32x56x56x64xf32>) -> tensor<32x64x56x56xf32>
  func.return %t : tensor<32x64x56x56xf32>
}
