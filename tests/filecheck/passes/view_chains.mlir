// RUN: fusec %s --split-input-file -p 'decompose,form-fusion-groups{remarks=false}' | filecheck %s
// RUN: fusec %s --split-input-file -p decompose,form-fusion-groups --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// A chain of slices, reshapes and transposes is one layout group (one copy
// of its composed strided view); a value read outside the chain ends it.

// GPT-2's head split: the slice, the reshape splitting the last axis and the
// transpose are one group; the bias add, read only by the chain, is computed
// in it at the elements the view reads (no kernel writes it).
// CHECK-LABEL: func.func @head_split
// REMARK: remark: fused nn.transpose (%t) into group g0: saves 384 B and 1 launch
// REMARK: remark: recomputed nn.add (%a) in group g0 instead of writing it: saves 480 B and 1 launch
// CHECK-NOT: nn.add
// CHECK: %[[H:.*]] = fusion.group (%x, %b) {name = "g0", kind = "layout"}
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<2x3x24xf32>, %[[B:.*]]: tensor<24xf32>):
// CHECK-NEXT: %[[A:.*]] = nn.add %[[X]], %[[B]]
// CHECK-NEXT: %[[S:.*]] = nn.slice %[[A]]
// CHECK-NEXT: %[[R:.*]] = nn.reshape %[[S]]
// CHECK-NEXT: %[[T:.*]] = nn.transpose %[[R]] {perm = [0, 2, 1, 3]}
// CHECK-NEXT: fusion.yield %[[T]] : tensor<2x2x3x4xf32>
// CHECK: func.return %[[H]]
func.func @head_split(%x: tensor<2x3x24xf32>, %b: tensor<24xf32>) -> tensor<2x2x3x4xf32> {
  %a = nn.add %x, %b : (tensor<2x3x24xf32>, tensor<24xf32>) -> tensor<2x3x24xf32>
  %s = nn.slice %a {starts = [0, 0, 8], limits = [2, 3, 16]} : (tensor<2x3x24xf32>) -> tensor<2x3x8xf32>
  %r = nn.reshape %s : (tensor<2x3x8xf32>) -> tensor<2x3x2x4xf32>
  %t = nn.transpose %r {perm = [0, 2, 1, 3]} : (tensor<2x3x2x4xf32>) -> tensor<2x2x3x4xf32>
  func.return %t : tensor<2x2x3x4xf32>
}

// -----

// The slice is returned too: the transpose does not merge past it.
// REMARK: missed: nn.transpose (%t) not fused with nn.slice (%s): nn.slice (%s) is also read by func.return; a chain of layout ops becomes one copy only through values nothing else reads
// CHECK-LABEL: func.func @middle_read_elsewhere
// CHECK-NOT: fusion.group
// CHECK: nn.slice
// CHECK-NEXT: nn.transpose
func.func @middle_read_elsewhere(%x: tensor<4x10xf32>) -> (tensor<4x6xf32>, tensor<6x4xf32>) {
  %s = nn.slice %x {starts = [0, 2], limits = [4, 8]} : (tensor<4x10xf32>) -> tensor<4x6xf32>
  %t = nn.transpose %s {perm = [1, 0]} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  func.return %s, %t : tensor<4x6xf32>, tensor<6x4xf32>
}

// -----

// A reshape merging dimensions the transposed view does not keep contiguous
// is one index map (analysis/view_map.py): the rows of the transpose become
// parts of the merged dimension, and the chain is one copy.
// CHECK-LABEL: func.func @merged_after_transpose
// CHECK: fusion.group (%x) {name = "g0", kind = "layout"}
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<6x4xf32>):
// CHECK-NEXT: %[[T:.*]] = nn.transpose %[[X]]
// CHECK-NEXT: %[[R:.*]] = nn.reshape %[[T]]
// CHECK-NEXT: fusion.yield %[[R]]
func.func @merged_after_transpose(%x: tensor<6x4xf32>) -> tensor<24xf32> {
  %t = nn.transpose %x {perm = [1, 0]} : (tensor<6x4xf32>) -> tensor<4x6xf32>
  %r = nn.reshape %t : (tensor<4x6xf32>) -> tensor<24xf32>
  func.return %r : tensor<24xf32>
}

// -----

// Rows of the transpose that a new dimension would cut across (6 = 2 x 3
// read as rows of 3 of an axis of 4 parts) have no such map: the reshape
// stays outside (a free view of the copy).
// REMARK: missed: nn.reshape (%r) not fused with nn.transpose (%t): the view nn.reshape -> 8x3 of 4x6 is not expressible as strides or as one index map
// CHECK-LABEL: func.func @not_strided
// CHECK-NOT: fusion.group
func.func @not_strided(%x: tensor<4x6xf32>) -> tensor<8x3xf32> {
  %t = nn.transpose %x {perm = [1, 0]} : (tensor<4x6xf32>) -> tensor<6x4xf32>
  %r = nn.reshape %t : (tensor<6x4xf32>) -> tensor<8x3xf32>
  func.return %r : tensor<8x3xf32>
}

// -----

// A gated unit written with slices: the bias add, read only by the two
// slices of the pointwise group, is computed in that group at the elements
// each slice reads (one kernel; no kernel writes %h).
// REMARK: remark: recomputed nn.add (%h) in group g0 instead of writing it: saves 192 B and 1 launch
// CHECK-LABEL: func.func @gated_halves
// CHECK-NOT: nn.add
// CHECK: %[[Y:.*]] = fusion.group (%x, %b) {name = "g0", kind = "pointwise"}
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<4x16xf32>, %[[B:.*]]: tensor<16xf32>):
// CHECK-NEXT: %[[H:.*]] = nn.add %[[X]], %[[B]]
// CHECK-NEXT: nn.slice %[[H]] {starts = [0, 0], limits = [4, 8]}
// CHECK-NEXT: nn.slice %[[H]] {starts = [0, 8], limits = [4, 16]}
// CHECK: func.return %[[Y]]
func.func @gated_halves(%x: tensor<4x16xf32>, %b: tensor<16xf32>) -> tensor<4x8xf32> {
  %h = nn.add %x, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %a = nn.slice %h {starts = [0, 0], limits = [4, 8]} : (tensor<4x16xf32>) -> tensor<4x8xf32>
  %g = nn.slice %h {starts = [0, 8], limits = [4, 16]} : (tensor<4x16xf32>) -> tensor<4x8xf32>
  %s = nn.silu %g : tensor<4x8xf32>
  %y = nn.mul %a, %s : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// -----

// A chain of elementwise ops (a pointwise group: mul, then relu) read only by
// a lone strided slice is evaluated where the slice reads: the slice's group
// holds both ops (no kernel writes %r), and the group of mul and relu is gone.
// REMARK: remark: fused nn.relu (%r) with nn.mul (%m): saves
// REMARK: remark: recomputed nn.mul (%m), nn.relu (%r) in group g0 instead of writing it: saves {{.*}} and 1 launch
// CHECK-LABEL: func.func @chain_before_strided_slice
// CHECK: %[[Y:.*]] = fusion.group (%x, %k) {name = "g0", kind = "layout"}
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<7x9xf32>, %[[K:.*]]: tensor<f32>):
// CHECK-NEXT: %[[M:.*]] = nn.mul %[[X]], %[[K]]
// CHECK-NEXT: %[[R:.*]] = nn.relu %[[M]]
// CHECK-NEXT: %[[S:.*]] = nn.slice %[[R]] {starts = [1, 0], limits = [7, 9], strides = [2, 2]}
// CHECK-NEXT: fusion.yield %[[S]]
// CHECK-NOT: fusion.group
// CHECK: func.return %[[Y]]
func.func @chain_before_strided_slice(%x: tensor<7x9xf32>) -> tensor<3x5xf32> {
  %k = nn.constant dense<0.5> : tensor<f32>
  %m = nn.mul %x, %k : (tensor<7x9xf32>, tensor<f32>) -> tensor<7x9xf32>
  %r = nn.relu %m : tensor<7x9xf32>
  %s = nn.slice %r {starts = [1, 0], limits = [7, 9], strides = [2, 2]} : (tensor<7x9xf32>) -> tensor<3x5xf32>
  func.return %s : tensor<3x5xf32>
}

// -----

// The multiply is a result too: its group writes it anyway, so the chain
// stays a kernel, and the slice a copy of its result.
// REMARK: missed: nn.mul (%m), nn.relu (%r) not recomputed in nn.slice (%s): nn.mul (%m) is also a result of the function; a chain is recomputed where views read it only when it writes nothing else
// CHECK-LABEL: func.func @chain_value_returned
// CHECK: fusion.group (%x, %k) {name = "g0", kind = "pointwise"}
// CHECK-NOT: fusion.group
// CHECK: nn.slice
func.func @chain_value_returned(%x: tensor<7x9xf32>) -> (tensor<3x5xf32>, tensor<7x9xf32>) {
  %k = nn.constant dense<0.5> : tensor<f32>
  %m = nn.mul %x, %k : (tensor<7x9xf32>, tensor<f32>) -> tensor<7x9xf32>
  %r = nn.relu %m : tensor<7x9xf32>
  %s = nn.slice %r {starts = [1, 0], limits = [7, 9], strides = [2, 2]} : (tensor<7x9xf32>) -> tensor<3x5xf32>
  func.return %s, %m : tensor<3x5xf32>, tensor<7x9xf32>
}
