// A column reduction: the sum over the leading axis of a row-major matrix,
// so the kept axis is the contiguous one (bias gradients, batch statistics).
func.func @column_sum(%x: tensor<8192x8192xf32>) -> tensor<1x8192xf32> {
  %s = nn.reduce_sum %x {axes = [0], keepdims = true} : (tensor<8192x8192xf32>) -> tensor<1x8192xf32>
  func.return %s : tensor<1x8192xf32>
}
