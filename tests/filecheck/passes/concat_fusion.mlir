// RUN: fusec %s --split-input-file -p decompose,form-fusion-groups --remarks 2>/dev/null | filecheck %s
// RUN: fusec %s --split-input-file -p decompose,form-fusion-groups --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// A concat of values the same kernel computes joins their pointwise group:
// the group iterates over the concat's result and evaluates each operand
// under a select on the coordinate along the axis (analysis/concat_operands.py).
// Rotary embedding's rotate-half is one group; nothing but the concat's
// result is yielded.

// CHECK-LABEL: func.func @rotate_half
// CHECK: %[[R:.*]] = fusion.group (%x, %cos, %sin) {name = "g0", kind = "pointwise"} : ({{.*}}) -> tensor<2x3x8xf32> {
// CHECK: %[[LO:.*]] = nn.sub
// CHECK: %[[HI:.*]] = nn.add
// CHECK-NEXT: %[[C:.*]] = nn.concat %[[LO]], %[[HI]] {axis = 2}
// CHECK-NEXT: fusion.yield %[[C]] : tensor<2x3x8xf32>
// CHECK-NOT: fusion.group
// CHECK: func.return %[[R]]
// REMARK: remark: fused nn.concat (%r) into group g0
func.func @rotate_half(%x: tensor<2x3x8xf32>, %cos: tensor<3x4xf32>, %sin: tensor<3x4xf32>) -> tensor<2x3x8xf32> {
  %x1 = nn.slice %x {starts = [0, 0, 0], limits = [2, 3, 4]} : (tensor<2x3x8xf32>) -> tensor<2x3x4xf32>
  %x2 = nn.slice %x {starts = [0, 0, 4], limits = [2, 3, 8]} : (tensor<2x3x8xf32>) -> tensor<2x3x4xf32>
  %a = nn.mul %x1, %cos : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  %b = nn.mul %x2, %sin : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  %lo = nn.sub %a, %b : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %c = nn.mul %x2, %cos : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  %d = nn.mul %x1, %sin : (tensor<2x3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  %hi = nn.add %c, %d : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %r = nn.concat %lo, %hi {axis = 2} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x8xf32>
  func.return %r : tensor<2x3x8xf32>
}

// -----

// A concat read by further pointwise work: the concat, its computed operand
// and the relu are one group; the input operand is read in place.

// CHECK-LABEL: func.func @computed_and_input_then_relu
// CHECK: %[[R:.*]] = fusion.group (%x, %y) {name = "g0", kind = "pointwise"}
// CHECK: %[[E:.*]] = nn.exp
// CHECK-NEXT: %[[C:.*]] = nn.concat %[[E]], %{{.*}} {axis = 0}
// CHECK-NEXT: %[[O:.*]] = nn.relu %[[C]]
// CHECK-NEXT: fusion.yield %[[O]] : tensor<5x4xf32>
// CHECK-NOT: fusion.group
func.func @computed_and_input_then_relu(%x: tensor<2x4xf32>, %y: tensor<3x4xf32>) -> tensor<5x4xf32> {
  %e = nn.exp %x : tensor<2x4xf32>
  %c = nn.concat %e, %y {axis = 0} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<5x4xf32>
  %r = nn.relu %c : tensor<5x4xf32>
  func.return %r : tensor<5x4xf32>
}

// -----

// The producing group also computes a value read outside the concat's
// operands (at its own shape, 3x4, not the concat's 3x8): refused, and the
// concat reads the operand back from memory.

// CHECK-LABEL: func.func @producer_also_writes
// CHECK: fusion.group (%x) {name = "g0", kind = "pointwise"}
// CHECK: fusion.group ({{.*}}) {name = "g1", kind = "pointwise"}
// CHECK-NEXT: ^bb0
// CHECK-NEXT: nn.concat
// REMARK: missed: nn.concat (%c) not fused into group g0: nn.mul (%m) is also read outside the operands of nn.concat (%c); a kernel evaluates a concat's computed operands only under its select, at their own shape, not at 3x8
func.func @producer_also_writes(%x: tensor<3x4xf32>, %y: tensor<3x4xf32>) -> (tensor<3x8xf32>, tensor<3x4xf32>) {
  %m = nn.mul %x, %x : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %e = nn.exp %m : tensor<3x4xf32>
  %n = nn.neg %m : tensor<3x4xf32>
  %c = nn.concat %e, %y {axis = 1} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x8xf32>
  %r = nn.relu %c : tensor<3x8xf32>
  func.return %r, %n : tensor<3x8xf32>, tensor<3x4xf32>
}
