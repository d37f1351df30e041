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
