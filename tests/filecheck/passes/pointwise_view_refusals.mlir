// RUN: fusec %s --split-input-file -p decompose,form-fusion-groups --remarks 2>&1 >/dev/null | filecheck %s

// Slices and reshapes of values read from memory fold into pointwise groups
// as strided views; these are the cases that cannot, each with its reason.

// A reshape that reads rows of 5 of a column slice as rows of 2 is neither an
// offset plus strides nor one index map (a row of 2 may cross two rows of
// the slice): the slice keeps its copy kernel (the reshape, a view of it, is
// read by the add). Merging whole rows of the slice is one index map.
// CHECK: missed: nn.reshape (%v) not fused with nn.slice (%s): the view nn.reshape -> 10x2 of 4x12 is not expressible as strides or as one index map (a slice across merged dimensions, or sizes that do not factor, need a copy)
func.func @not_strided(%x: tensor<4x12xf32>, %y: tensor<10x2xf32>) -> tensor<10x2xf32> {
  %s = nn.slice %x {starts = [0, 3], limits = [4, 8], strides = [1, 1]} : (tensor<4x12xf32>) -> tensor<4x5xf32>
  %v = nn.reshape %s : (tensor<4x5xf32>) -> tensor<10x2xf32>
  %r = nn.add %v, %y : (tensor<10x2xf32>, tensor<10x2xf32>) -> tensor<10x2xf32>
  func.return %r : tensor<10x2xf32>
}

// -----

// The slice reads a value the same group computes (its copy stays).
// CHECK: missed: nn.exp (%e) not fused into group g0: nn.slice would read nn.exp, a value the same kernel computes; a pointwise kernel folds a layout op only over operands it reads from memory
func.func @computed(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %e = nn.exp %x : tensor<4x6xf32>
  %s = nn.slice %e {starts = [0, 0], limits = [4, 6], strides = [1, 1]} : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %r = nn.add %e, %s : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  func.return %r : tensor<4x6xf32>
}
