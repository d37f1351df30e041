func.func @PuIvAS(%qwNXKkh: tensor<5x2xf32>, %tm0m5l: tensor<1xf32>, %R: tensor<1xf32>, %RXT1Tx-N: tensor<1xf32>, %VdUpye: tensor<2x1xf32>, %_0goz_-v: tensor<1xf32>, %M8-E7b: tensor<1x5x1xf32>) -> (tensor<2xf32>, tensor<1x1x5xf32>, tensor<5x1xf32>) {
  %_1n = nn.reduce_mean %qwNXKkh {axes = [1], keepdims = true} : (tensor<5x2xf32>) -> tensor<5x1xf32>
  %Smkyd = nn.batch_norm %_1n, %tm0m5l, %R, %RXT1Tx-N, %_0goz_-v {epsilon = 1.0e-03} : (tensor<5x1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<5x1xf32>
  %a8j = nn.clamp %Smkyd : tensor<5x1xf32>
  %U = nn.sub %M8-E7b, %a8j : (tensor<1x5x1xf32>, tensor<5x1xf32>) -> tensor<1x5x1xf32>
  %DyLnECe = nn.reshape %VdUpye : (tensor<2x1xf32>) -> tensor<2xf32>
  %upGlzqVp1$Y8EoznbvxoZxxtsmkkPfHndKpCfFk4rBe = nn.transpose %U {perm = [0, 2, 1]} : (tensor<1x5x1xf32>) -> tensor<1x1x5xf32>
  func.return %DyLnECe, %upGlzqVp1$Y8EoznbvxoZxxtsmkkPfHndKpCfFk4rBe, %a8j : tensor<2xf32>, tensor<1x1x5xf32>, tensor<5x1xf32>
}
