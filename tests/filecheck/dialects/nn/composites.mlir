// RUN: fusec %s -p "" | filecheck %s --enable-var-scope
// RUN: fusec %s -p "" --print-op-generic | fusec - -p "" | filecheck %s --enable-var-scope

// Composites stay single ops until `decompose`; their defaults (axis = -1,
// the norms' epsilon) stay omitted, and epsilon keeps the spelling and type
// it was written with.

// CHECK-LABEL: func.func @softmax
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf32>)
func.func @softmax(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  // CHECK-NEXT: %[[S0:.*]] = nn.softmax %[[X]] : tensor<4x8xf32>
  // CHECK-NEXT: %[[S1:.*]] = nn.softmax %[[S0]] {axis = 0} : tensor<4x8xf32>
  // CHECK-NEXT: %[[L0:.*]] = nn.log_softmax %[[S1]] : tensor<4x8xf32>
  // CHECK-NEXT: %[[L1:.*]] = nn.log_softmax %[[L0]] {axis = -2} : tensor<4x8xf32>
  // CHECK-NEXT: func.return %[[S1]], %[[L1]]
  %0 = nn.softmax %x : tensor<4x8xf32>
  %1 = nn.softmax %0 {axis = 0} : tensor<4x8xf32>
  %2 = nn.log_softmax %1 : tensor<4x8xf32>
  %3 = nn.log_softmax %2 {axis = -2} : tensor<4x8xf32>
  func.return %1, %3 : tensor<4x8xf32>, tensor<4x8xf32>
}

// layer_norm normalizes over axis..rank-1: with axis = -2 the parameters
// are 2-D. Epsilon: default, typed f32, bare f64.

// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x4x8xf32>, %[[G:[^:]*]]: tensor<8xf32>, %[[B:[^:]*]]: tensor<8xf32>, %[[G2:[^:]*]]: tensor<4x8xf32>, %[[B2:[^:]*]]: tensor<4x8xf32>)
func.func @layer_norm(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>, %g2: tensor<4x8xf32>, %b2: tensor<4x8xf32>) -> tensor<2x4x8xf32> {
  // CHECK-NEXT: %[[N0:.*]] = nn.layer_norm %[[X]], %[[G]], %[[B]] : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  // CHECK-NEXT: %[[N1:.*]] = nn.layer_norm %[[N0]], %[[G]], %[[B]] {axis = -1, epsilon = 1.0e-05 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  // CHECK-NEXT: %[[N2:.*]] = nn.layer_norm %[[N1]], %[[G2]], %[[B2]] {axis = -2, epsilon = 1.0e-06} : (tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  // CHECK-NEXT: %[[N3:.*]] = nn.layer_norm %[[N2]], %[[G2]], %[[B2]] {axis = 1, epsilon = 0.001} : (tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  // CHECK-NEXT: func.return %[[N3]]
  %0 = nn.layer_norm %x, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %1 = nn.layer_norm %0, %g, %b {axis = -1, epsilon = 1.0e-05 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %2 = nn.layer_norm %1, %g2, %b2 {axis = -2, epsilon = 1.0e-06} : (tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  %3 = nn.layer_norm %2, %g2, %b2 {axis = 1, epsilon = 1.0e-03} : (tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  func.return %3 : tensor<2x4x8xf32>
}

// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf16>, %[[G:[^:]*]]: tensor<8xf16>)
func.func @rms_norm(%x: tensor<4x8xf16>, %g: tensor<8xf16>) -> tensor<4x8xf16> {
  // CHECK-NEXT: %[[R0:.*]] = nn.rms_norm %[[X]], %[[G]] : (tensor<4x8xf16>, tensor<8xf16>) -> tensor<4x8xf16>
  // CHECK-NEXT: %[[R1:.*]] = nn.rms_norm %[[R0]], %[[G]] {epsilon = 1.0e-06 : f32} : (tensor<4x8xf16>, tensor<8xf16>) -> tensor<4x8xf16>
  // CHECK-NEXT: func.return %[[R1]]
  %0 = nn.rms_norm %x, %g : (tensor<4x8xf16>, tensor<8xf16>) -> tensor<4x8xf16>
  %1 = nn.rms_norm %0, %g {epsilon = 1.0e-06 : f32} : (tensor<4x8xf16>, tensor<8xf16>) -> tensor<4x8xf16>
  func.return %1 : tensor<4x8xf16>
}

// batch_norm: operands scale, bias, mean, var in that order, one per channel.

// CHECK-LABEL: func.func @batch_norm
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x3x4x4xf32>, %[[S:[^:]*]]: tensor<3xf32>, %[[B:[^:]*]]: tensor<3xf32>, %[[M:[^:]*]]: tensor<3xf32>, %[[V:[^:]*]]: tensor<3xf32>)
func.func @batch_norm(%x: tensor<2x3x4x4xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>) -> tensor<2x3x4x4xf32> {
  // CHECK-NEXT: %[[Y0:.*]] = nn.batch_norm %[[X]], %[[S]], %[[B]], %[[M]], %[[V]] : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  // CHECK-NEXT: %[[Y1:.*]] = nn.batch_norm %[[Y0]], %[[S]], %[[B]], %[[M]], %[[V]] {epsilon = 0.001 : f32} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  // CHECK-NEXT: func.return %[[Y1]]
  %0 = nn.batch_norm %x, %s, %b, %m, %v : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  %1 = nn.batch_norm %0, %s, %b, %m, %v {epsilon = 0.001 : f32} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  func.return %1 : tensor<2x3x4x4xf32>
}
