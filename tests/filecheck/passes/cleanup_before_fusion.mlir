// RUN: fusec %s --split-input-file | filecheck %s
// RUN: fusec %s --split-input-file -p decompose,cse | filecheck %s --check-prefix=CSE
// RUN: fusec %s --split-input-file -p decompose,dce | filecheck %s --check-prefix=DCE

// The default pipeline runs xDSL's cse and dce before form-fusion-groups:
// an op nothing reads gets no kernel, an op written twice is computed once,
// and a dead reader no longer makes its producer write a second result.

// An unused nn.tanh is gone before fusion: one group, no tanh.
// CHECK-LABEL: func.func @unused_tanh
// CHECK-NOT: nn.tanh
// CHECK: fusion.group
// CHECK-NOT: fusion.group
// CHECK: func.return
// DCE-LABEL: func.func @unused_tanh
// DCE-NOT: nn.tanh
// DCE: func.return
func.func @unused_tanh(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %dead = nn.tanh %x : tensor<4x8xf32>
  %e = nn.exp %x : tensor<4x8xf32>
  func.return %e : tensor<4x8xf32>
}

// -----

// The same pure op written twice is computed once: one nn.exp, read twice.
// CHECK-LABEL: func.func @twice
// CHECK: fusion.group
// CHECK: %[[E:.*]] = nn.exp
// CHECK-NOT: nn.exp
// CHECK: nn.add %[[E]], %[[E]]
// CSE-LABEL: func.func @twice
// CSE-SAME: (%[[X:[^:]*]]: tensor<4x8xf32>)
// CSE-NEXT: %[[A:.*]] = nn.exp %[[X]]
// CSE-NEXT: nn.add %[[A]], %[[A]]
// CSE-NEXT: func.return
func.func @twice(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = nn.exp %x : tensor<4x8xf32>
  %b = nn.exp %x : tensor<4x8xf32>
  %s = nn.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %s : tensor<4x8xf32>
}

// -----

// %a feeds a dead branch (%t, %u) and a live neighbour (%n): with the branch
// gone, exp and neg fuse into one group that yields only %n.
// CHECK-LABEL: func.func @dead_branch
// CHECK: %[[G:.*]] = fusion.group
// CHECK: nn.exp
// CHECK-NEXT: %[[N:.*]] = nn.neg
// CHECK-NEXT: fusion.yield %[[N]] : tensor<4x8xf32>
// CHECK-NOT: fusion.group
// CHECK-NOT: nn.tanh
// CHECK: func.return %[[G]]
func.func @dead_branch(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = nn.exp %x : tensor<4x8xf32>
  %t = nn.tanh %a : tensor<4x8xf32>
  %u = nn.mul %t, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %n = nn.neg %a : tensor<4x8xf32>
  func.return %n : tensor<4x8xf32>
}
