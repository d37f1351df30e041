// RUN: fusec %s --split-input-file -p 'decompose,form-fusion-groups{remarks=false},group-each-op,tile-and-promote' | filecheck %s
// RUN: fusec %s --split-input-file -p decompose,form-fusion-groups --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// Slices, reshapes and transposes of values read from memory are read in
// place by a reduction group, through their chain's strided view
// (analysis/reduction_views.py): no copy kernel runs.

// The slice and the exp join the sum: one row kernel.
// REMARK: remark: fused nn.reduce_sum (%r) into group g0
// CHECK-LABEL: func.func @sum_exp_slice
// CHECK: %[[R:.*]] = fusion.group (%x) {name = "g0", kind = "reduction", schedule = #fusion.reduction<layout = "row"
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<8x40xf32>):
// CHECK-NEXT: %[[S:.*]] = nn.slice %[[X]] {starts = [0, 4], limits = [8, 36]}
// CHECK-NEXT: %[[E:.*]] = nn.exp %[[S]]
// CHECK-NEXT: nn.reduce_sum %[[E]]
// CHECK-NOT: fusion.group
// CHECK: func.return %[[R]]
func.func @sum_exp_slice(%x: tensor<8x40xf32>) -> tensor<8x1xf32> {
  %s = nn.slice %x {starts = [0, 4], limits = [8, 36]} : (tensor<8x40xf32>) -> tensor<8x32xf32>
  %e = nn.exp %s : tensor<8x32xf32>
  %r = nn.reduce_sum %e {axes = [1], keepdims = true} : (tensor<8x32xf32>) -> tensor<8x1xf32>
  func.return %r : tensor<8x1xf32>
}

// -----

// The bias add, read only through the slice, is evaluated in the reduction
// group at the element the slice reads; the tanh is a row-shaped output of
// the same kernel.
// REMARK: remark: recomputed nn.add (%h) in group g0 instead of writing it
// CHECK-LABEL: func.func @bias_slice_sum_tanh
// CHECK-NOT: nn.add
// CHECK: %[[R:.*]], %[[T:.*]] = fusion.group (%x, %b) {name = "g0", kind = "reduction"
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<8x40xf32>, %[[B:.*]]: tensor<40xf32>):
// CHECK-NEXT: %[[H:.*]] = nn.add %[[X]], %[[B]]
// CHECK-NEXT: %[[S:.*]] = nn.slice %[[H]]
// CHECK-NEXT: nn.reduce_sum %[[S]]
// CHECK-NEXT: nn.tanh %[[S]]
// CHECK-NOT: fusion.group
// CHECK: func.return %[[R]], %[[T]]
func.func @bias_slice_sum_tanh(%x: tensor<8x40xf32>, %b: tensor<40xf32>) -> (tensor<8x1xf32>, tensor<8x32xf32>) {
  %h = nn.add %x, %b : (tensor<8x40xf32>, tensor<40xf32>) -> tensor<8x40xf32>
  %s = nn.slice %h {starts = [0, 4], limits = [8, 36]} : (tensor<8x40xf32>) -> tensor<8x32xf32>
  %r = nn.reduce_sum %s {axes = [1], keepdims = true} : (tensor<8x32xf32>) -> tensor<8x1xf32>
  %t = nn.tanh %s : tensor<8x32xf32>
  func.return %r, %t : tensor<8x1xf32>, tensor<8x32xf32>
}

// -----

// The rows of the transpose are the columns of %x: the group takes the
// column layout, in which consecutive threads read consecutive rows.
// CHECK-LABEL: func.func @sum_exp_transpose
// CHECK: fusion.group (%x) {name = "g0", kind = "reduction", schedule = #fusion.reduction<layout = "column"
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<32x8xf32>):
// CHECK-NEXT: nn.transpose %[[X]] {perm = [1, 0]}
// CHECK-NOT: fusion.group
func.func @sum_exp_transpose(%x: tensor<32x8xf32>) -> tensor<8x1xf32> {
  %t = nn.transpose %x {perm = [1, 0]} : (tensor<32x8xf32>) -> tensor<8x32xf32>
  %e = nn.exp %t : tensor<8x32xf32>
  %r = nn.reduce_sum %e {axes = [1], keepdims = true} : (tensor<8x32xf32>) -> tensor<8x1xf32>
  func.return %r : tensor<8x1xf32>
}

// -----

// Refused: the softmax writes its result row-major, and reads %x coalesced
// only in the column layout; the transpose stays a copy through a shared
// tile (both sides coalesced) and the softmax a row kernel.
// REMARK: missed: nn.transpose (%t) not fused into group g0: a reduction kernel would read an operand through nn.transpose (%t), but the view is contiguous along another axis than the row-shaped values the kernel reads or writes, so neither reduction layout coalesces both (the view stays a copy through a shared-memory tile)
// CHECK-LABEL: func.func @softmax_transpose
// CHECK: fusion.group (%x) {name = "g1", kind = "layout"
// CHECK: fusion.group (%t) {name = "g0", kind = "reduction", schedule = #fusion.reduction<layout = "row"
func.func @softmax_transpose(%x: tensor<32x8xf32>) -> tensor<8x32xf32> {
  %t = nn.transpose %x {perm = [1, 0]} : (tensor<32x8xf32>) -> tensor<8x32xf32>
  %y = nn.softmax %t {axis = 1} : tensor<8x32xf32>
  func.return %y : tensor<8x32xf32>
}

// -----

// A slice of a value one reduction group computes joins the reduction that
// reads it; the two reductions differ in shape, so they stay two kernels
// (no copy kernel between them).
// REMARK: missed: the group of nn.slice (%s) (2 ops) not fused into group g0: the reductions cannot share one iteration space
// CHECK-LABEL: func.func @slice_of_computed
// CHECK: fusion.group (%x) {name = "g0", kind = "reduction"
// CHECK: fusion.group (%{{.*}}) {name = "g1", kind = "reduction"
// CHECK-NEXT: ^bb0(%[[D:.*]]: tensor<8x32xf32>):
// CHECK-NEXT: nn.slice %[[D]]
// CHECK-NOT: fusion.group
func.func @slice_of_computed(%x: tensor<8x32xf32>) -> tensor<8x1xf32> {
  %m = nn.reduce_max %x {axes = [1], keepdims = true} : (tensor<8x32xf32>) -> tensor<8x1xf32>
  %d = nn.sub %x, %m : (tensor<8x32xf32>, tensor<8x1xf32>) -> tensor<8x32xf32>
  %s = nn.slice %d {starts = [0, 0], limits = [8, 16]} : (tensor<8x32xf32>) -> tensor<8x16xf32>
  %r = nn.reduce_sum %s {axes = [1], keepdims = true} : (tensor<8x16xf32>) -> tensor<8x1xf32>
  func.return %r : tensor<8x1xf32>
}
