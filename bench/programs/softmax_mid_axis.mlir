// Softmax over the middle axis of a 3-D tensor (attention over a sequence
// stored [batch, seq, feature]): a multi-pass reduction over a strided axis.
func.func @softmax_mid_axis(%x: tensor<32x1024x512xf32>) -> tensor<32x1024x512xf32> {
  %y = nn.softmax %x {axis = 1} : tensor<32x1024x512xf32>
  func.return %y : tensor<32x1024x512xf32>
}
