// Two branches joined along channels (Inception, DenseNet, U-Net skips), then a
// per-channel scale and relu: a concat read in place by its consumer.
func.func @concat_scale_relu(%a: tensor<32x256x28x28xf32>, %b: tensor<32x128x28x28xf32>, %s: tensor<384x1x1xf32>) -> tensor<32x384x28x28xf32> {
  %c = nn.concat %a, %b {axis = 1} : (tensor<32x256x28x28xf32>, tensor<32x128x28x28xf32>) -> tensor<32x384x28x28xf32>
  %m = nn.mul %c, %s : (tensor<32x384x28x28xf32>, tensor<384x1x1xf32>) -> tensor<32x384x28x28xf32>
  %r = nn.relu %m : tensor<32x384x28x28xf32>
  func.return %r : tensor<32x384x28x28xf32>
}
