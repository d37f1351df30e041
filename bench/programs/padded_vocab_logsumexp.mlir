// The log-sum-exp of a cross-entropy loss over the real vocabulary of logits
// padded to a multiple of 64 (32064 columns, the first 32000 used): the slice
// is read in place by the row reduction (one kernel, no copy of the logits).
func.func @padded_vocab_logsumexp(%x: tensor<8192x32064xf32>) -> tensor<8192x1xf32> {
  %v = nn.slice %x {starts = [0, 0], limits = [8192, 32000]} : (tensor<8192x32064xf32>) -> tensor<8192x32000xf32>
  %m = nn.reduce_max %v {axes = [1], keepdims = true} : (tensor<8192x32000xf32>) -> tensor<8192x1xf32>
  %d = nn.sub %v, %m : (tensor<8192x32000xf32>, tensor<8192x1xf32>) -> tensor<8192x32000xf32>
  %e = nn.exp %d : tensor<8192x32000xf32>
  %s = nn.reduce_sum %e {axes = [1], keepdims = true} : (tensor<8192x32000xf32>) -> tensor<8192x1xf32>
  %l = nn.log %s : tensor<8192x1xf32>
  %r = nn.add %l, %m : (tensor<8192x1xf32>, tensor<8192x1xf32>) -> tensor<8192x1xf32>
  func.return %r : tensor<8192x1xf32>
}
