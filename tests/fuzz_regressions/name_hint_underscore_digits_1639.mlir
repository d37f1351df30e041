// fusec fuzz: error at compile-fused
// detail: InternalPassError: internal error in pass 'form-fusion-groups': ValueError: ('Invalid BlockArgument name format ``.', "Make sure names contain only characters of [A-Za-z0-9_$.-] and don't start with a number.") (pipeline.py:177)
// known: no
// inputs: seed=1639 edges=yes
// found by: python -m fusec.fuzz --seed 7001 (graph 1639)
func.func @f(%ZMBBP9iIdnaubowpyda3qOGJB_iZDlFS_3FfN3B$K9UEoVzKto7: tensor<2x4xf32>, %Lm3W: tensor<4xf32>, %iqoKA.Y: tensor<4xf32>, %_8: tensor<4xf32>, %r7rn: tensor<4xf32>) -> (tensor<2x4xf32>) {
  %_9tGAd = nn.batch_norm %ZMBBP9iIdnaubowpyda3qOGJB_iZDlFS_3FfN3B$K9UEoVzKto7, %Lm3W, %iqoKA.Y, %_8, %r7rn : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  func.return %_9tGAd : tensor<2x4xf32>
}
