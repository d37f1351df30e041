// fusec fuzz: error at run-fused
// detail: IndexError: tid=[1, 0, 0] ctaid=[0, 0, 1]: index 16 is out of bounds for axis 0 with size 12 (devicearray.py:166)
// known: item 1 (kernel names collide for long function names)
// inputs: seed=8 edges=no
// found by: python -m fusec.fuzz --seed 100 (graph 8), minimized
func.func @KFW62DkdZKFerFbxmZwxSkB8RVfD$_fgoj$n8e(%v1: tensor<3x4x2x1xf32>, %v2: tensor<2x3x3x1xf32>) -> (tensor<3x4x1x1xf32>, tensor<2x3x5x1xf32>) {
  %v4 = nn.avg_pool2d %v1 {kernel = [2, 1], strides = [2, 1], pads = [0, 0, 1, 0]} : (tensor<3x4x2x1xf32>) -> tensor<3x4x1x1xf32>
  %v6 = nn.avg_pool2d %v2 {kernel = [3, 1], strides = [1, 2], pads = [2, 0, 2, 0]} : (tensor<2x3x3x1xf32>) -> tensor<2x3x5x1xf32>
  func.return %v4, %v6 : tensor<3x4x1x1xf32>, tensor<2x3x5x1xf32>
}
