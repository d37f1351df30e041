func.func @f(%v0: tensor<3xf32>, %v1: tensor<1xi1>, %v2: tensor<2x1xf32>) -> (tensor<1xf32>, tensor<2x1xf32>, tensor<f32>) {
  %v3 = nn.slice %v0 {starts = [1], limits = [3], strides = [2]} : (tensor<3xf32>) -> tensor<1xf32>
  %v4 = nn.constant dense<[0.942]> : tensor<1xf32>
  %v5 = nn.select %v1, %v3, %v4 : (tensor<1xi1>, tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  %v6 = nn.min %v4, %v2 : (tensor<1xf32>, tensor<2x1xf32>) -> tensor<2x1xf32>
  %v7 = nn.reduce_mean %v4 {axes = [0], keepdims = false} : (tensor<1xf32>) -> tensor<f32>
  func.return %v5, %v6, %v7 : tensor<1xf32>, tensor<2x1xf32>, tensor<f32>
}
