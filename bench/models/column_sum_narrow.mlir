// A column reduction with few kept columns and long columns: 64 channels of
// a million rows (channels-last batch statistics). Few rows to spread over
// the GPU, so the schedule must split each column over many threads.
func.func @column_sum_narrow(%x: tensor<1048576x64xf32>) -> tensor<1x64xf32> {
  %s = nn.reduce_sum %x {axes = [0], keepdims = true} : (tensor<1048576x64xf32>) -> tensor<1x64xf32>
  func.return %s : tensor<1x64xf32>
}
