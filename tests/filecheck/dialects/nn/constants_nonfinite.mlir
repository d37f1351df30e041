// Non-finite constants print as exact hex bytes, so they read back unchanged.
// RUN: fusec %s -p "" | filecheck %s
// RUN: fusec %s -p "" | fusec - -p "" | filecheck %s

// CHECK-LABEL: func.func @nonfinite
func.func @nonfinite(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: %[[NEG_INF:.*]] = nn.constant dense<"0x000080FF"> : tensor<f32>
  %c = nn.constant dense<"0x000080FF"> : tensor<f32>
  // CHECK: nn.constant dense<"0x0000803F0000807F"> : tensor<2xf32>
  %d = nn.constant dense<"0x0000803F0000807F"> : tensor<2xf32>
  // CHECK: nn.max %{{.*}}, %[[NEG_INF]]
  %y = nn.max %x, %c : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
