func.func @gated_mlp(%x: tensor<4096x1024xf32>, %g: tensor<1024xf32>, %wg: tensor<1024x2816xf32>, %wu: tensor<1024x2816xf32>, %wd: tensor<2816x1024xf32>) -> tensor<4096x1024xf32> {
  %n = nn.rms_norm %x, %g {axis = -1, epsilon = 1.0e-06} : (tensor<4096x1024xf32>, tensor<1024xf32>) -> tensor<4096x1024xf32>
  %gate = nn.matmul %n, %wg : (tensor<4096x1024xf32>, tensor<1024x2816xf32>) -> tensor<4096x2816xf32>
  %up = nn.matmul %n, %wu : (tensor<4096x1024xf32>, tensor<1024x2816xf32>) -> tensor<4096x2816xf32>
  %a = nn.silu %gate : tensor<4096x2816xf32>
  %h = nn.mul %a, %up : (tensor<4096x2816xf32>, tensor<4096x2816xf32>) -> tensor<4096x2816xf32>
  %d = nn.matmul %h, %wd : (tensor<4096x2816xf32>, tensor<2816x1024xf32>) -> tensor<4096x1024xf32>
  %y = nn.add %d, %x : (tensor<4096x1024xf32>, tensor<4096x1024xf32>) -> tensor<4096x1024xf32>
  func.return %y : tensor<4096x1024xf32>
}
