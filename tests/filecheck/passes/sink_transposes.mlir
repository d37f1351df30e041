// RUN: fusec %s --split-input-file -p sink-transposes | filecheck %s
// RUN: fusec %s --split-input-file -p 'sink-transposes,cse,dce,form-fusion-groups{remarks=false}' | filecheck %s --check-prefix=GROUP

// The transpose moves above relu and add onto x and y; the bias [8] becomes
// [8, 1] by a reshape (its elements keep their order).
// CHECK-LABEL: func.func @add_bias_relu
// CHECK-NEXT: %[[XT:.*]] = nn.transpose %x {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[BT:.*]] = nn.reshape %b : (tensor<8xf32>) -> tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = nn.add %[[XT]], %[[BT]] : (tensor<8x4xf32>, tensor<8x1xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[T:.*]] = nn.relu %[[A]] : tensor<8x4xf32>
// CHECK-NEXT: func.return %[[T]]
// GROUP-LABEL: func.func @add_bias_relu
// GROUP: fusion.group (%x, %b) {name = "g0", kind = "pointwise"}
// GROUP-NOT: fusion.group
func.func @add_bias_relu(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<8x4xf32> {
  %a = nn.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r = nn.relu %a : tensor<4x8xf32>
  %t = nn.transpose %r {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  func.return %t : tensor<8x4xf32>
}

// -----

// %r is also returned: it stays, and the transpose reads it.
// CHECK-LABEL: func.func @read_twice
// GROUP-LABEL: func.func @read_twice
// CHECK-NEXT: %r = nn.tanh %x
// CHECK-NEXT: %t = nn.transpose %r
func.func @read_twice(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x4xf32>) {
  %r = nn.tanh %x : tensor<4x8xf32>
  %t = nn.transpose %r {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  func.return %r, %t : tensor<4x8xf32>, tensor<8x4xf32>
}

// -----

// A transpose of a reduction's result stays where it is.
// CHECK-LABEL: func.func @after_a_reduction
// CHECK-NEXT: %s = nn.reduce_sum %x
// CHECK-NEXT: %t = nn.transpose %s
func.func @after_a_reduction(%x: tensor<4x8x2xf32>) -> tensor<8x4xf32> {
  %s = nn.reduce_sum %x {axes = [2]} : (tensor<4x8x2xf32>) -> tensor<4x8xf32>
  %t = nn.transpose %s {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  func.return %t : tensor<8x4xf32>
}

// -----

// A transpose that moves only axes of extent 1 keeps its elements' order: it
// is a reshape, or nothing when the shape stays.
// CHECK-LABEL: func.func @order_kept
// CHECK-NEXT: %[[R:.*]] = nn.reshape %x : (tensor<1x5x1xf32>) -> tensor<1x1x5xf32>
// CHECK-NEXT: %[[E:.*]] = nn.exp %[[R]]
// CHECK-NEXT: %[[N:.*]] = nn.neg %y : tensor<2x3xf32>
// CHECK-NEXT: func.return %[[E]], %[[N]]
func.func @order_kept(%x: tensor<1x5x1xf32>, %y: tensor<2x3xf32>) -> (tensor<1x1x5xf32>, tensor<2x3xf32>) {
  %t = nn.transpose %x {perm = [0, 2, 1]} : (tensor<1x5x1xf32>) -> tensor<1x1x5xf32>
  %e = nn.exp %t : tensor<1x1x5xf32>
  %i = nn.transpose %y {perm = [0, 1]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %n = nn.neg %i : tensor<2x3xf32>
  func.return %e, %n : tensor<1x1x5xf32>, tensor<2x3xf32>
}

// -----

// A reshape that only inserts extents of 1, read by a concat, moves above the
// elementwise ops it reads, like a transpose; a bias along the last axis keeps
// its axis.
// CHECK-LABEL: func.func @unit_reshape
// CHECK-NEXT: %[[X:.*]] = nn.reshape %x : (tensor<3x5xf32>) -> tensor<3x5x1xf32>
// CHECK-NEXT: %[[B:.*]] = nn.reshape %b : (tensor<5xf32>) -> tensor<1x5x1xf32>
// CHECK-NEXT: %[[A:.*]] = nn.add %[[X]], %[[B]] : (tensor<3x5x1xf32>, tensor<1x5x1xf32>) -> tensor<3x5x1xf32>
// CHECK-NEXT: %[[T:.*]] = nn.tanh %[[A]] : tensor<3x5x1xf32>
// CHECK-NEXT: nn.concat %[[T]], %y
func.func @unit_reshape(%x: tensor<3x5xf32>, %b: tensor<5xf32>, %y: tensor<3x5x1xf32>) -> tensor<3x5x2xf32> {
  %a = nn.add %x, %b : (tensor<3x5xf32>, tensor<5xf32>) -> tensor<3x5xf32>
  %t = nn.tanh %a : tensor<3x5xf32>
  %r = nn.reshape %t : (tensor<3x5xf32>) -> tensor<3x5x1xf32>
  %c = nn.concat %r, %y {axis = 2} : (tensor<3x5x1xf32>, tensor<3x5x1xf32>) -> tensor<3x5x2xf32>
  func.return %c : tensor<3x5x2xf32>
}

// -----

// Read by anything else (a squeeze of a reduction's epilogue), it stays.
// CHECK-LABEL: func.func @squeeze_stays
// CHECK: %[[Y:.*]] = nn.add %l, %m
// CHECK-NEXT: nn.reshape %[[Y]] : (tensor<4x1xf32>) -> tensor<4xf32>
func.func @squeeze_stays(%x: tensor<4x6xf32>) -> tensor<4xf32> {
  %m = nn.reduce_max %x {axes = [1], keepdims = true} : (tensor<4x6xf32>) -> tensor<4x1xf32>
  %l = nn.log %m : tensor<4x1xf32>
  %y = nn.add %l, %m : (tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %r = nn.reshape %y : (tensor<4x1xf32>) -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// -----

// An interleave: the pieces' pointwise ops move below their unit reshapes,
// and the ops after the merging reshape move above it (a bias over the rows
// becomes [3, 1, 1], one over the merged axis [1, 5, 2]): one kernel computes
// the concat and its neighbours, the last reshape is a view of its result.
// CHECK-LABEL: func.func @interleave
// CHECK: %[[X:.*]] = nn.reshape %x : (tensor<3x5xf32>) -> tensor<3x5x1xf32>
// CHECK-NEXT: %[[E:.*]] = nn.exp %[[X]] : tensor<3x5x1xf32>
// CHECK: %[[C:.*]] = nn.concat %[[E]],
// CHECK-SAME: -> tensor<3x5x2xf32>
// CHECK: %[[B:.*]] = nn.reshape %b : (tensor<3x1xf32>) -> tensor<3x1x1xf32>
// CHECK-NEXT: %[[A:.*]] = nn.add %[[C]], %[[B]] : (tensor<3x5x2xf32>, tensor<3x1x1xf32>) -> tensor<3x5x2xf32>
// CHECK: %[[D:.*]] = nn.reshape %d : (tensor<10xf32>) -> tensor<1x5x2xf32>
// CHECK-NEXT: %[[M:.*]] = nn.mul %[[A]], %[[D]] : (tensor<3x5x2xf32>, tensor<1x5x2xf32>) -> tensor<3x5x2xf32>
// CHECK: %[[S:.*]] = nn.sigmoid %[[M]] : tensor<3x5x2xf32>
// CHECK-NEXT: %[[R:.*]] = nn.reshape %[[S]] : (tensor<3x5x2xf32>) -> tensor<3x10xf32>
// CHECK-NEXT: func.return %[[R]]
// GROUP-LABEL: func.func @interleave
// GROUP: fusion.group (%x, %y, %b, %d) {name = "g0", kind = "pointwise"}
// GROUP-NOT: fusion.group
func.func @interleave(%x: tensor<3x5xf32>, %y: tensor<3x5xf32>, %b: tensor<3x1xf32>, %d: tensor<10xf32>) -> tensor<3x10xf32> {
  %e = nn.exp %x : tensor<3x5xf32>
  %xr = nn.reshape %e : (tensor<3x5xf32>) -> tensor<3x5x1xf32>
  %yr = nn.reshape %y : (tensor<3x5xf32>) -> tensor<3x5x1xf32>
  %c = nn.concat %xr, %yr {axis = 2} : (tensor<3x5x1xf32>, tensor<3x5x1xf32>) -> tensor<3x5x2xf32>
  %m = nn.reshape %c : (tensor<3x5x2xf32>) -> tensor<3x10xf32>
  %a = nn.add %m, %b : (tensor<3x10xf32>, tensor<3x1xf32>) -> tensor<3x10xf32>
  %md = nn.mul %a, %d : (tensor<3x10xf32>, tensor<10xf32>) -> tensor<3x10xf32>
  %s = nn.sigmoid %md : tensor<3x10xf32>
  func.return %s : tensor<3x10xf32>
}

// -----

// A reshape splitting the concat's axis, read with a bias along one of the
// new axes only: the bias does not line up with the concat's axes, and the
// op stays after the reshape.
// CHECK-LABEL: func.func @split_axis_bias
// GROUP-LABEL: func.func @split_axis_bias
// CHECK: %[[M:.*]] = nn.reshape %c : (tensor<3x10xf32>) -> tensor<3x5x2xf32>
// CHECK-NEXT: nn.add %[[M]], %b : (tensor<3x5x2xf32>, tensor<2xf32>) -> tensor<3x5x2xf32>
func.func @split_axis_bias(%x: tensor<3x4xf32>, %y: tensor<3x6xf32>, %b: tensor<2xf32>) -> tensor<3x5x2xf32> {
  %c = nn.concat %x, %y {axis = 1} : (tensor<3x4xf32>, tensor<3x6xf32>) -> tensor<3x10xf32>
  %m = nn.reshape %c : (tensor<3x10xf32>) -> tensor<3x5x2xf32>
  %a = nn.add %m, %b : (tensor<3x5x2xf32>, tensor<2xf32>) -> tensor<3x5x2xf32>
  func.return %a : tensor<3x5x2xf32>
}
