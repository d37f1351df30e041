// RUN: fusec %s -p dependency-analysis | filecheck %s
// RUN: fusec %s -p dependency-analysis,form-fusion-groups{remarks=false} | filecheck %s --check-prefix=STRIP

// `dependency-analysis` records each op's program-order index, kind and
// number of distinct consumers (func.return included); form-fusion-groups
// removes the attributes again.

// CHECK-LABEL: func.func @kinds
// CHECK: %[[C:.*]] = nn.constant {dep.index = 0, dep.kind = "constant", dep.consumers = 1} dense<2.0>
// CHECK: %[[E:.*]] = nn.exp %[[X:.*]] {dep.index = 1, dep.kind = "elementwise", dep.consumers = 3} : tensor<4x8xf32>
// CHECK: %[[S:.*]] = nn.reduce_sum %[[E]] {axes = [1], keepdims = true, dep.index = 2, dep.kind = "reduction", dep.consumers = 1}
// CHECK: %[[D:.*]] = nn.div %[[E]], %[[S]] {dep.index = 3, dep.kind = "elementwise", dep.consumers = 1}
// CHECK: %[[T:.*]] = nn.transpose %[[D]] {perm = [1, 0], dep.index = 4, dep.kind = "layout", dep.consumers = 1}
// CHECK: %[[M:.*]] = nn.matmul %[[T]], %[[E]] {dep.index = 5, dep.kind = "contraction", dep.consumers = 1}
// CHECK: %[[B:.*]] = nn.broadcast_to %[[C]] {dep.index = 6, dep.kind = "broadcast", dep.consumers = 1}
// CHECK: %[[P:.*]] = nn.max_pool2d %[[Y:.*]] {kernel = [2, 2], dep.index = 7, dep.kind = "window", dep.consumers = 1}
// STRIP-LABEL: func.func @kinds
// STRIP-NOT: dep.
func.func @kinds(%x: tensor<4x8xf32>, %y: tensor<1x1x4x4xf32>) -> (tensor<8x8xf32>, tensor<4x8xf32>, tensor<1x1x3x3xf32>) {
  %c = nn.constant dense<2.0> : tensor<f32>
  %e = nn.exp %x : tensor<4x8xf32>
  %s = nn.reduce_sum %e {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %d = nn.div %e, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %t = nn.transpose %d {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %m = nn.matmul %t, %e : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %b = nn.broadcast_to %c : (tensor<f32>) -> tensor<4x8xf32>
  %p = nn.max_pool2d %y {kernel = [2, 2]} : (tensor<1x1x4x4xf32>) -> tensor<1x1x3x3xf32>
  func.return %m, %b, %p : tensor<8x8xf32>, tensor<4x8xf32>, tensor<1x1x3x3xf32>
}
