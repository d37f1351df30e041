// RUN: fusec %s --split-input-file --verify-diagnostics -p decompose,group-each-op,lower-to-numba | filecheck %s --enable-var-scope --check-prefixes=CHECK,ERR
// RUN: fusec %s --split-input-file --verify-diagnostics -p decompose,group-each-op,lower-to-numba | fusec - --split-input-file --verify-diagnostics -p "" | filecheck %s --enable-var-scope
// RUN: fusec %s --split-input-file --verify-diagnostics -p lower-to-numba | filecheck %s --check-prefix=UNGROUPED

// Each group is annotated with its kernel's name and launch shape.

// CHECK-LABEL: func.func @launches
func.func @launches(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %big: tensor<1024x1024xf32>,
                    %huge: tensor<268435456xf32>, %odd: tensor<999x3xf32>)
    -> (tensor<32xf32>, tensor<8x4xf32>, tensor<1024x1024xf32>, tensor<268435456xf32>, tensor<999x3xf32>) {
  // CHECK: %[[Y:.*]] = fusion.group (%{{.*}}, %{{.*}}) {name = "g0", kind = "pointwise", schedule = #fusion.pointwise<elements_per_thread = 4, block = 256>, kernel = "launches_g0_add", grid = [1, 1, 1], block = [256, 1, 1], shared_bytes = 0}
  // UNGROUPED: lower_to_numba.mlir:[[# @LINE + 1]]:3: error: 'nn.add' is outside any fusion.group; run 'group-each-op' before code generation
  %y = nn.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK: nn.reshape %[[Y]]
  %r = nn.reshape %y : (tensor<4x8xf32>) -> tensor<32xf32>
  // A layout copy gets the pointwise schedule: here the flat one, whose warps
  // read the 4 rows in runs of 8 floats (whole sectors; a tile would be 4 wide).
  // CHECK: {name = "g1", kind = "layout", schedule = #fusion.pointwise<elements_per_thread = 4, block = 256>, kernel = "launches_g1_transpose", grid = [1, 1, 1], block = [256, 1, 1], shared_bytes = 0}
  %t = nn.transpose %y {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  // 2^20 elements, 4 per thread: one block per chunk of 1024 elements.
  // CHECK: {name = "g2", kind = "pointwise", schedule = #fusion.pointwise<elements_per_thread = 4, block = 256>, kernel = "launches_g2_exp", grid = [1024, 1, 1], block = [256, 1, 1], shared_bytes = 0}
  %e = nn.exp %big : tensor<1024x1024xf32>
  // One block per chunk at any size (up to CUDA's 2^31 - 1 blocks).
  // CHECK: {name = "g3", kind = "pointwise", schedule = #fusion.pointwise<elements_per_thread = 4, block = 256>, kernel = "launches_g3_relu", grid = [262144, 1, 1], block = [256, 1, 1], shared_bytes = 0}
  %h = nn.relu %huge : tensor<268435456xf32>
  // 2997 elements: 3 chunks, the last one partial (clamped loads, guarded stores).
  // CHECK: {name = "g4", kind = "pointwise", schedule = #fusion.pointwise<elements_per_thread = 4, block = 256>, kernel = "launches_g4_neg", grid = [3, 1, 1], block = [256, 1, 1], shared_bytes = 0}
  %n = nn.neg %odd : tensor<999x3xf32>
  func.return %r, %t, %e, %h, %n : tensor<32xf32>, tensor<8x4xf32>, tensor<1024x1024xf32>, tensor<268435456xf32>, tensor<999x3xf32>
}

// -----

// Kernel names are sanitized and unique across the module.

// CHECK-LABEL: func.func @"x(): import os"
// CHECK: kernel = "x____import_os_g0_exp"
func.func @"x(): import os"(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = nn.exp %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK-LABEL: func.func @"x(); import os"
// CHECK: kernel = "x____import_os_g0_exp_2"
func.func @"x(); import os"(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = nn.exp %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}

// -----

// bf16 has kernels too (its elements stored as uint16 bits).

// CHECK-LABEL: func.func @bf16
// CHECK: kernel = "bf16_g0_cast"
// CHECK: kernel = "bf16_g1_exp"
func.func @bf16(%x: tensor<4xf32>) -> tensor<4xbf16> {
  %h = nn.cast %x : (tensor<4xf32>) -> tensor<4xbf16>
  %e = nn.exp %h : tensor<4xbf16>
  func.return %e : tensor<4xbf16>
}
