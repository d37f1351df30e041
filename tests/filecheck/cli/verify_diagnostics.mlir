// RUN: fusec %s -p "" --split-input-file --verify-diagnostics | filecheck %s
// RUN: not fusec %s -p "" --split-input-file 2>&1 | filecheck %s --check-prefix=FAIL

// --verify-diagnostics prints each section's error in place of its module
// (and exits 0), so valid and invalid sections can share a file; line
// numbers stay those of the whole file. Without it the first error stops
// fusec with exit code 1 and nothing on stdout.

// CHECK:      builtin.module {
// CHECK-NEXT:   func.func @valid
// CHECK:      // -----
// CHECK-NEXT: {{.*}}verify_diagnostics.mlir:[[# @LINE + 18]]:3: error: 'nn.add' op shapes 4, 3 do not broadcast (dimension -1 has sizes [3, 4])
// CHECK-NEXT:   %0 = nn.add %x, %y : (tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32>
// CHECK-NEXT:   ^
// CHECK-NEXT: // -----
// CHECK-NEXT: builtin.module {
// CHECK-NEXT:   func.func @valid_again

// FAIL-NOT: builtin.module
// FAIL:     {{.*}}verify_diagnostics.mlir:[[# @LINE + 10]]:3: error: 'nn.add' op shapes 4, 3 do not broadcast (dimension -1 has sizes [3, 4])
// FAIL-NOT: builtin.module

func.func @valid(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}

// -----

func.func @invalid(%x: tensor<4xf32>, %y: tensor<3xf32>) -> tensor<4xf32> {
  %0 = nn.add %x, %y : (tensor<4xf32>, tensor<3xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @valid_again(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
