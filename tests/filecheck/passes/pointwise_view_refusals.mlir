// RUN: fusec %s --split-input-file -p decompose,form-fusion-groups --remarks 2>&1 >/dev/null | filecheck %s

// Slices and reshapes of values read from memory fold into pointwise groups
// as strided views; these are the cases that cannot, each with its reason.

// A reshape that merges the rows of a column slice is not an offset plus
// strides: the slice keeps its copy kernel (the reshape, a view of it, is read
// by the add).
// CHECK: missed: nn.reshape (%v) not fused with nn.slice (%s): the view nn.reshape -> 24 of 4x12 is not expressible as strides (a reshape that merges dimensions which are not contiguous needs a copy)
func.func @not_strided(%x: tensor<4x12xf32>, %y: tensor<24xf32>) -> tensor<24xf32> {
  %s = nn.slice %x {starts = [0, 3], limits = [4, 9], strides = [1, 1]} : (tensor<4x12xf32>) -> tensor<4x6xf32>
  %v = nn.reshape %s : (tensor<4x6xf32>) -> tensor<24xf32>
  %r = nn.add %v, %y : (tensor<24xf32>, tensor<24xf32>) -> tensor<24xf32>
  func.return %r : tensor<24xf32>
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
