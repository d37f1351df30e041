// fusec fuzz: error at run-fused
// detail: ValueError: tid=[0, 0, 0] ctaid=[0, 0, 0]: math domain error (<fusec kernels d19b185987a1b608>:33)
// known: item 7 (the simulator raises where a GPU returns inf/NaN)
// inputs: seed=0 edges=yes
// found by: issue 10 item 7; 0/-1/NaN from the edge inputs
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %x = nn.log %a : tensor<4xf32>
  func.return %x : tensor<4xf32>
}
