// RUN: fusec %s --split-input-file --load-pass-plugin %S/div_to_mul.py -p div-to-mul | filecheck %s
// RUN: not fusec %S/div_to_mul_zero.mlir --load-pass-plugin %S/div_to_mul.py -p div-to-mul 2>&1 | filecheck %s --check-prefix=ZERO

// The division by a constant becomes a multiplication by a new constant
// holding its reciprocal; the old constant, now unread, is gone.
// CHECK-LABEL: func.func @scale
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x2xf32>)
// CHECK-NEXT: %[[R:.*]] = nn.constant dense<[0.5, 0.25]> : tensor<2xf32>
// CHECK-NEXT: %[[Y:.*]] = nn.mul %[[X]], %[[R]] : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
// CHECK-NEXT: func.return %[[Y]]
func.func @scale(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %c = nn.constant dense<[2.0, 4.0]> : tensor<2xf32>
  %y = nn.div %x, %c : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  func.return %y : tensor<2x2xf32>
}

// -----

// A division by a runtime value stays.
// CHECK-LABEL: func.func @runtime
// CHECK-NEXT: nn.div
func.func @runtime(%x: tensor<2xf32>, %d: tensor<2xf32>) -> tensor<2xf32> {
  %y = nn.div %x, %d : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  func.return %y : tensor<2xf32>
}

// ZERO: div_to_mul_zero.mlir:4:3: error: 'nn.div' op divides by a constant that holds zero
