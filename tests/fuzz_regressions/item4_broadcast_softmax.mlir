// fusec fuzz: error at run-fused
// detail: NameError: tid=[0, 1, 0] ctaid=[0, 0, 0]: name 'c1' is not defined (<fusec kernels ed90845da9ca8a3d>:75)
// known: item 4 (a broadcast feeding softmax or a reduction in one group: NameError)
// inputs: seed=0 edges=no
// found by: issue 10 item 4, as reported
func.func @f(%a: tensor<4x1xf32>) -> tensor<4x8xf32> {
  %b = nn.broadcast_to %a : (tensor<4x1xf32>) -> tensor<4x8xf32>
  %s = nn.softmax %b {axis = -1} : tensor<4x8xf32>
  func.return %s : tensor<4x8xf32>
}
