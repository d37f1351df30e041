// Mean squared error over 64M elements to one scalar: a full reduction that
// only a split over many blocks can feed the GPU.
func.func @mse_loss(%p: tensor<8192x8192xf32>, %t: tensor<8192x8192xf32>) -> tensor<f32> {
  %d = nn.sub %p, %t : (tensor<8192x8192xf32>, tensor<8192x8192xf32>) -> tensor<8192x8192xf32>
  %s = nn.mul %d, %d : (tensor<8192x8192xf32>, tensor<8192x8192xf32>) -> tensor<8192x8192xf32>
  %m = nn.reduce_mean %s {axes = [0, 1], keepdims = false} : (tensor<8192x8192xf32>) -> tensor<f32>
  func.return %m : tensor<f32>
}
