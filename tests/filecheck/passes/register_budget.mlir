// RUN: fusec %s -p 'register-budget{max_registers=32 ptxas=false}' | filecheck %s --enable-var-scope
// RUN: fusec %s -p 'register-budget{max_registers=32 ptxas=false}' --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec %s -p 'register-budget{max_registers=32 ptxas=false}' --remarks-in-ir | filecheck %s --check-prefix=ATTR

// Seven arrays at 4 elements per thread are over a cap of 32 (on estimates
// alone, `ptxas=false`): the group splits into stages, each within the cap,
// the crossing value passed through memory. The captures prove which stage
// feeds which.

// The remark goes to --remarks; the printed IR holds it only with --remarks-in-ir.
// REMARK: remark: split group g0 into g0_s0 and g0_s1 after op 3: it needs ~38 registers (base 8, arrays in flight 28, live intermediates 2), over the budget of 32 registers per thread
// ATTR: builtin.module attributes {fusion.remarks = ["remark: split group g0 into g0_s0 and g0_s1 after op 3: it needs ~38 registers
// CHECK-NOT: fusion.remarks
// CHECK-LABEL: func.func @split
// CHECK-SAME: (%[[A:[^:]*]]: tensor<4096xf32>, %[[B:[^:]*]]: tensor<4096xf32>, %[[C:[^:]*]]: tensor<4096xf32>, %[[D:[^:]*]]: tensor<4096xf32>, %[[E:[^:]*]]: tensor<4096xf32>, %[[F:[^:]*]]: tensor<4096xf32>)
// CHECK: %[[S:.*]] = fusion.group (%[[A]], %[[B]], %[[C]], %[[D]]) {name = "g0_s0", kind = "pointwise", est_registers = 30
// CHECK: nn.mul
// CHECK: %[[T:.*]] = fusion.group (%[[E]], %[[F]], %[[S]]) {name = "g0_s1", kind = "pointwise", est_registers = 25
// CHECK: func.return %[[T]]
func.func @split(%a: tensor<4096xf32>, %b: tensor<4096xf32>, %c: tensor<4096xf32>, %d: tensor<4096xf32>, %e: tensor<4096xf32>, %f: tensor<4096xf32>) -> tensor<4096xf32> {
  %y = fusion.group (%a, %b, %c, %d, %e, %f) {name = "g0", kind = "pointwise"} : (tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32> {
  ^bb0(%a1: tensor<4096xf32>, %b1: tensor<4096xf32>, %c1: tensor<4096xf32>, %d1: tensor<4096xf32>, %e1: tensor<4096xf32>, %f1: tensor<4096xf32>):
    %p = nn.mul %a1, %b1 : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
    %q = nn.mul %c1, %d1 : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
    %s = nn.add %p, %q : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
    %r = nn.mul %e1, %f1 : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
    %t = nn.add %s, %r : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
    fusion.yield %t : tensor<4096xf32>
  }
  func.return %y : tensor<4096xf32>
}
