// RUN: fusec %s --split-input-file -p 'decompose,form-fusion-groups,tile-and-promote' | filecheck %s

// A transpose moving the innermost axis joins the pointwise group reading
// it; the group runs the 32x32 tile (padded to 32x33 f32 in shared memory).

// CHECK-LABEL: func.func @transposed_add
// CHECK: %[[R:.*]] = fusion.group (%x, %y) {name = "g0", kind = "pointwise", {{.*}}schedule = #fusion.pointwise<elements_per_thread = 4, block = 256, tile = 32>, schedule_text = "pointwise: 32x32 output tiles, transposed operands staged through shared memory, 256 threads per block", shared_bytes_est = 4224, est_registers = {{[0-9]+}}}
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<33x47xf32>, %[[Y:.*]]: tensor<47x33xf32>):
// CHECK-NEXT: %[[T:.*]] = nn.transpose %[[X]] {perm = [1, 0]}
// CHECK-NEXT: %[[S:.*]] = nn.add %[[T]], %[[Y]]
// CHECK-NEXT: %[[O:.*]] = nn.relu %[[S]]
// CHECK-NEXT: fusion.yield %[[O]]
// CHECK-NOT: fusion.group
// CHECK: func.return %[[R]]
func.func @transposed_add(%x: tensor<33x47xf32>, %y: tensor<47x33xf32>) -> tensor<47x33xf32> {
  %t = nn.transpose %x {perm = [1, 0]} : (tensor<33x47xf32>) -> tensor<47x33xf32>
  %s = nn.add %t, %y : (tensor<47x33xf32>, tensor<47x33xf32>) -> tensor<47x33xf32>
  %r = nn.relu %s : tensor<47x33xf32>
  func.return %r : tensor<47x33xf32>
}

// -----

// A permutation that keeps the innermost axis is a strided read: fused, flat
// schedule (tile = 0 is the default and not printed).

// CHECK-LABEL: func.func @keeps_innermost
// CHECK: fusion.group (%x, %y) {name = "g0", kind = "pointwise", {{.*}}schedule = #fusion.pointwise<elements_per_thread = 4, block = 256>, schedule_text = "pointwise: 4 elements per thread, 256 threads per block", shared_bytes_est = 0, est_registers = {{[0-9]+}}}
// CHECK: nn.transpose {{.*}} {perm = [1, 0, 2]}
// CHECK-NOT: fusion.group
func.func @keeps_innermost(%x: tensor<3x5x8xf32>, %y: tensor<5x3x8xf32>) -> tensor<5x3x8xf32> {
  %t = nn.transpose %x {perm = [1, 0, 2]} : (tensor<3x5x8xf32>) -> tensor<5x3x8xf32>
  %s = nn.mul %t, %y : (tensor<5x3x8xf32>, tensor<5x3x8xf32>) -> tensor<5x3x8xf32>
  func.return %s : tensor<5x3x8xf32>
}

// -----

// NCHW -> NHWC feeding an add: the operand is contiguous along W (output
// axis 2), the result along C (axis 3); the tile spans both.

// CHECK-LABEL: func.func @nchw_to_nhwc
// CHECK: schedule = #fusion.pointwise<elements_per_thread = 4, block = 256, tile = 32>
// CHECK-NOT: fusion.group
func.func @nchw_to_nhwc(%x: tensor<2x6x5x7xf32>, %b: tensor<6xf32>) -> tensor<2x5x7x6xf32> {
  %t = nn.transpose %x {perm = [0, 2, 3, 1]} : (tensor<2x6x5x7xf32>) -> tensor<2x5x7x6xf32>
  %s = nn.add %t, %b : (tensor<2x5x7x6xf32>, tensor<6xf32>) -> tensor<2x5x7x6xf32>
  func.return %s : tensor<2x5x7x6xf32>
}

// -----

// Three channels: a warp of the flat schedule reads x in three runs of ten
// floats (whole 32-byte sectors), where the tile would be three wide.

// CHECK-LABEL: func.func @nchw_to_nhwc_three_channels
// CHECK: schedule = #fusion.pointwise<elements_per_thread = 4, block = 256>
// CHECK-NOT: fusion.group
func.func @nchw_to_nhwc_three_channels(%x: tensor<2x3x5x7xf32>, %b: tensor<3xf32>) -> tensor<2x5x7x3xf32> {
  %t = nn.transpose %x {perm = [0, 2, 3, 1]} : (tensor<2x3x5x7xf32>) -> tensor<2x5x7x3xf32>
  %s = nn.add %t, %b : (tensor<2x5x7x3xf32>, tensor<3xf32>) -> tensor<2x5x7x3xf32>
  func.return %s : tensor<2x5x7x3xf32>
}

// -----

// `transposed_add` in bf16: a tile of halves has 128 threads, 8 elements
// each (16 bytes staged per thread, as 4 f32 elements give); the tile
// still holds f32 (4224 bytes).

// CHECK-LABEL: func.func @transposed_add_bf16
// CHECK: schedule = #fusion.pointwise<elements_per_thread = 8, block = 128, tile = 32>, schedule_text = "pointwise: 32x32 output tiles, transposed operands staged through shared memory, 128 threads per block", shared_bytes_est = 4224
func.func @transposed_add_bf16(%x: tensor<33x47xbf16>, %y: tensor<47x33xbf16>) -> tensor<47x33xbf16> {
  %t = nn.transpose %x {perm = [1, 0]} : (tensor<33x47xbf16>) -> tensor<47x33xbf16>
  %s = nn.add %t, %y : (tensor<47x33xbf16>, tensor<47x33xbf16>) -> tensor<47x33xbf16>
  %r = nn.relu %s : tensor<47x33xbf16>
  func.return %r : tensor<47x33xbf16>
}
