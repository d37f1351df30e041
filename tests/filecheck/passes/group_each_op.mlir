// RUN: fusec %s --split-input-file --verify-diagnostics -p group-each-op | filecheck %s --enable-var-scope
// RUN: fusec %s --split-input-file --verify-diagnostics -p group-each-op | fusec - --split-input-file --verify-diagnostics -p "" | filecheck %s --enable-var-scope

// Every nn op but constants and reshapes becomes its own group; the kind says
// which emitter generates it. The captures prove the groups read the values
// the ops read, the CHECK-NOTs that no op stayed outside.

// CHECK-LABEL: func.func @kinds
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf32>, %[[W:[^:]*]]: tensor<8x8xf32>, %[[IMG:[^:]*]]: tensor<1x2x4x4xf32>)
func.func @kinds(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %img: tensor<1x2x4x4xf32>)
    -> (tensor<32xf32>, tensor<4x1xf32>, tensor<4x8xf32>, tensor<1x2x2x2xf32>) {
  // CHECK: %[[C:.*]] = nn.constant dense<2.0> : tensor<f32>
  %c = nn.constant dense<2.0> : tensor<f32>
  // An op reading one value twice gets one group input.
  // CHECK-NEXT: %[[SQ:.*]] = fusion.group (%[[X]]) {name = "g0", kind = "pointwise"} : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: ^{{.*}}(%[[A:.*]]: tensor<4x8xf32>):
  // CHECK-NEXT: %[[SQ1:.*]] = nn.mul %[[A]], %[[A]]
  // CHECK-NEXT: fusion.yield %[[SQ1]] : tensor<4x8xf32>
  // CHECK-NEXT: }
  %sq = nn.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %[[Y:.*]] = fusion.group (%[[SQ]], %[[C]]) {name = "g1", kind = "pointwise"}
  // CHECK: nn.add
  %y = nn.add %sq, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  // A reshape stays a view, outside any group.
  // CHECK: %[[R:.*]] = nn.reshape %[[Y]] : (tensor<4x8xf32>) -> tensor<32xf32>
  %r = nn.reshape %y : (tensor<4x8xf32>) -> tensor<32xf32>
  // CHECK-NEXT: %[[S:.*]] = fusion.group (%[[Y]]) {name = "g2", kind = "reduction"}
  %s = nn.reduce_sum %y {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  // CHECK: %[[T:.*]] = fusion.group (%[[Y]]) {name = "g3", kind = "layout"}
  %t = nn.transpose %y {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  // CHECK: %[[MM:.*]] = fusion.group (%[[X]], %[[W]]) {name = "g4", kind = "contraction"}
  %mm = nn.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // CHECK: %[[P:.*]] = fusion.group (%[[IMG]]) {name = "g5", kind = "window"}
  // CHECK-NEXT: ^{{.*}}(%[[I:.*]]: tensor<1x2x4x4xf32>):
  // CHECK-NEXT: nn.max_pool2d %[[I]] {kernel = [2, 2], strides = [2, 2]}
  %p = nn.max_pool2d %img {kernel = [2, 2], strides = [2, 2]} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  // CHECK: func.return %[[R]], %[[S]], %[[MM]], %[[P]]
  func.return %r, %s, %mm, %p : tensor<32xf32>, tensor<4x1xf32>, tensor<4x8xf32>, tensor<1x2x2x2xf32>
}

// -----

// Ops already in a group stay there; new names continue after the largest.

// CHECK-LABEL: func.func @continues_numbering
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32>)
func.func @continues_numbering(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK-NEXT: %[[E:.*]] = fusion.group (%[[X]]) {name = "g7", kind = "pointwise"}
  // CHECK-NEXT: ^{{.*}}(%[[A:.*]]: tensor<4xf32>):
  // CHECK-NEXT: %[[E1:.*]] = nn.exp %[[A]]
  // CHECK-NEXT: %[[N1:.*]] = nn.neg %[[E1]]
  // CHECK-NEXT: fusion.yield %[[N1]]
  %e = fusion.group (%x) {name = "g7", kind = "pointwise"} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %e1 = nn.exp %a : tensor<4xf32>
    %n1 = nn.neg %e1 : tensor<4xf32>
    fusion.yield %n1 : tensor<4xf32>
  }
  // CHECK: %[[R:.*]] = fusion.group (%[[E]]) {name = "g8", kind = "pointwise"}
  // CHECK-NEXT: ^{{.*}}(%[[B:.*]]: tensor<4xf32>):
  // CHECK-NEXT: nn.relu %[[B]]
  %r = nn.relu %e : tensor<4xf32>
  // CHECK: %[[T:.*]] = fusion.group (%[[R]]) {name = "g9", kind = "pointwise"}
  // CHECK-NOT: fusion.group
  // CHECK: func.return %[[T]]
  %t = nn.tanh %r : tensor<4xf32>
  func.return %t : tensor<4xf32>
}

// -----

// A composite left whole by a fusion contract is a reduction group.

// CHECK-LABEL: func.func @composite
// CHECK: fusion.group (%{{.*}}) {name = "g0", kind = "reduction"}
// CHECK-NEXT: ^
// CHECK-NEXT: nn.softmax %{{.*}} {axis = -1, fusion = "never"}
func.func @composite(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = nn.softmax %x {axis = -1, fusion = "never"} : tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// -----

// Batch norm is elementwise: its own pointwise group (the emitter reads its
// [C] parameters along dimension 1).

// CHECK-LABEL: func.func @batch_norm
// CHECK: fusion.group (%{{.*}}, %{{.*}}) {name = "g0", kind = "pointwise"}
// CHECK-NEXT: ^
// CHECK-NEXT: nn.batch_norm
func.func @batch_norm(%x: tensor<1x2x2x2xf32>, %s: tensor<2xf32>) -> tensor<1x2x2x2xf32> {
  %y = nn.batch_norm %x, %s, %s, %s, %s : (tensor<1x2x2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x2x2xf32>
  func.return %y : tensor<1x2x2x2xf32>
}

