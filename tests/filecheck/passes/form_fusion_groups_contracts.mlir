// RUN: fusec %s --split-input-file --verify-diagnostics -p decompose,form-fusion-groups{remarks=false} | filecheck %s

// Fusion contracts: `fusion = "never"` keeps an op alone; `fusion = "must"`
// fails the compile, at the op, naming what blocked it when the op does not
// end up in a kernel with a neighbour.

// CHECK-LABEL: func.func @must_satisfied
// CHECK: fusion.group
// CHECK-NEXT: ^bb0
// CHECK-NEXT: %[[E:.*]] = nn.exp %{{.*}} {fusion = "must"}
// CHECK-NEXT: %[[R:.*]] = nn.relu %[[E]]
// CHECK-NEXT: fusion.yield %[[R]]
func.func @must_satisfied(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %e = nn.exp %x {fusion = "must"} : tensor<64x32xf32>
  %r = nn.relu %e : tensor<64x32xf32>
  func.return %r : tensor<64x32xf32>
}

// -----

// CHECK: form_fusion_groups_contracts.mlir:[[# @LINE + 3]]:3: error: nn.matmul (%m) has fusion = "must" but was not fused with a neighbour: a reduction group and a contraction group cannot share one kernel (no schedule computes both)
func.func @must_blocked(%x: tensor<64x32xf32>, %w: tensor<32x16xf32>) -> tensor<64x16xf32> {
  %s = nn.softmax %x : tensor<64x32xf32>
  %m = nn.matmul %s, %w {fusion = "must"} : (tensor<64x32xf32>, tensor<32x16xf32>) -> tensor<64x16xf32>
  func.return %m : tensor<64x16xf32>
}

// -----

// CHECK: error: nn.exp (%e) has fusion = "must" but was not fused with a neighbour: no producer or consumer could take it
func.func @must_alone(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %e = nn.exp %x {fusion = "must"} : tensor<64x32xf32>
  func.return %e : tensor<64x32xf32>
}

// -----

// CHECK-LABEL: func.func @never
// CHECK: %[[E:.*]] = nn.exp %{{.*}} {fusion = "never"}
// CHECK-NEXT: %[[G:.*]] = fusion.group (%[[E]])
// CHECK: nn.relu
// CHECK: nn.tanh
func.func @never(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %e = nn.exp %x {fusion = "never"} : tensor<64x32xf32>
  %r = nn.relu %e : tensor<64x32xf32>
  %t = nn.tanh %r : tensor<64x32xf32>
  func.return %t : tensor<64x32xf32>
}
