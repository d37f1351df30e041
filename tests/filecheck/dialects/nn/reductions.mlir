// RUN: fusec %s -p "" | filecheck %s --enable-var-scope
// RUN: fusec %s -p "" --print-op-generic | fusec - -p "" | filecheck %s --enable-var-scope

// Reductions keep their axes as written (negative axes count from the end);
// keepdims is printed only when it was given.

// CHECK-LABEL: func.func @reductions
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x3x4xf32>)
func.func @reductions(%x: tensor<2x3x4xf32>) -> (tensor<2x1x1xf32>, tensor<2x3xf32>, tensor<3x4xf32>, tensor<f32>, tensor<2x3x1xf32>) {
  // CHECK-NEXT: %[[SUM:.*]] = nn.reduce_sum %[[X]] {axes = [1, 2], keepdims = true} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  // CHECK-NEXT: %[[MAX:.*]] = nn.reduce_max %[[X]] {axes = [-1]} : (tensor<2x3x4xf32>) -> tensor<2x3xf32>
  // CHECK-NEXT: %[[MIN:.*]] = nn.reduce_min %[[X]] {axes = [0], keepdims = false} : (tensor<2x3x4xf32>) -> tensor<3x4xf32>
  // CHECK-NEXT: %[[MEAN:.*]] = nn.reduce_mean %[[X]] {axes = [0, -2, 2]} : (tensor<2x3x4xf32>) -> tensor<f32>
  // CHECK-NEXT: %[[KEEP:.*]] = nn.reduce_mean %[[X]] {axes = [-1], keepdims = true} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  // CHECK-NEXT: func.return %[[SUM]], %[[MAX]], %[[MIN]], %[[MEAN]], %[[KEEP]]
  %sum = nn.reduce_sum %x {axes = [1, 2], keepdims = true} : (tensor<2x3x4xf32>) -> tensor<2x1x1xf32>
  %max = nn.reduce_max %x {axes = [-1]} : (tensor<2x3x4xf32>) -> tensor<2x3xf32>
  %min = nn.reduce_min %x {axes = [0], keepdims = false} : (tensor<2x3x4xf32>) -> tensor<3x4xf32>
  %mean = nn.reduce_mean %x {axes = [0, -2, 2]} : (tensor<2x3x4xf32>) -> tensor<f32>
  %keep = nn.reduce_mean %x {axes = [-1], keepdims = true} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  func.return %sum, %max, %min, %mean, %keep : tensor<2x1x1xf32>, tensor<2x3xf32>, tensor<3x4xf32>, tensor<f32>, tensor<2x3x1xf32>
}

// Integer tensors reduce with sum, max and min; the axes may come unsorted,
// and MLIR's `array<i64: ...>` spelling is accepted too (printed as is).

// CHECK-LABEL: func.func @integer_reductions
// CHECK-SAME: (%[[I:[^:]*]]: tensor<4x5xi32>, %[[L:[^:]*]]: tensor<6xi64>)
func.func @integer_reductions(%i: tensor<4x5xi32>, %l: tensor<6xi64>) -> (tensor<i32>, tensor<1xi64>, tensor<4xi32>) {
  // CHECK-NEXT: %[[S:.*]] = nn.reduce_sum %[[I]] {axes = [1, 0]} : (tensor<4x5xi32>) -> tensor<i32>
  // CHECK-NEXT: %[[M:.*]] = nn.reduce_max %[[L]] {axes = [0], keepdims = true} : (tensor<6xi64>) -> tensor<1xi64>
  // CHECK-NEXT: %[[N:.*]] = nn.reduce_min %[[I]] {axes = array<i64: 1>} : (tensor<4x5xi32>) -> tensor<4xi32>
  // CHECK-NEXT: func.return %[[S]], %[[M]], %[[N]]
  %s = nn.reduce_sum %i {axes = [1, 0]} : (tensor<4x5xi32>) -> tensor<i32>
  %m = nn.reduce_max %l {axes = [0], keepdims = true} : (tensor<6xi64>) -> tensor<1xi64>
  %n = nn.reduce_min %i {axes = array<i64: 1>} : (tensor<4x5xi32>) -> tensor<4xi32>
  func.return %s, %m, %n : tensor<i32>, tensor<1xi64>, tensor<4xi32>
}
