// RUN: fusec %s -p "" | filecheck %s
// RUN: fusec %s -p "" --print-op-generic | fusec - -p "" | filecheck %s

// CHECK-LABEL: func.func @softmax
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: %[[M:.*]] = nn.reduce_max %[[X]] {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %m = nn.reduce_max %x {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  // CHECK: %[[D:.*]] = nn.sub %[[X]], %[[M]] : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %d = nn.sub %x, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  // CHECK: %[[E:.*]] = nn.exp %[[D]] : tensor<4x8xf32>
  %e = nn.exp %d : tensor<4x8xf32>
  // CHECK: func.return %[[E]] : tensor<4x8xf32>
  func.return %e : tensor<4x8xf32>
}
