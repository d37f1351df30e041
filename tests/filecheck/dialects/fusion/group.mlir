// RUN: fusec %s -p "" | filecheck %s --enable-var-scope
// RUN: fusec %s -p "" --print-op-generic | fusec - -p "" | filecheck %s --enable-var-scope

// A fusion.group takes its inputs as block arguments and hands results out
// through fusion.yield; what passes decided about it rides in its attribute
// dictionary, nested dictionaries included.

// CHECK-LABEL: func.func @single_result
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf32>, %[[B:[^:]*]]: tensor<8xf32>)
func.func @single_result(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: %[[G:.*]] = fusion.group (%[[X]], %[[B]]) {kind = "pointwise", tile = [4, 8], shared_bytes = 0} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: ^{{.*}}(%[[XA:[^:]*]]: tensor<4x8xf32>, %[[BA:[^:]*]]: tensor<8xf32>):
  // CHECK-NEXT:   %[[S:.*]] = nn.add %[[XA]], %[[BA]] : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT:   %[[R:.*]] = nn.relu %[[S]] : tensor<4x8xf32>
  // CHECK-NEXT:   fusion.yield %[[R]] : tensor<4x8xf32>
  // CHECK-NEXT: }
  // CHECK-NEXT: func.return %[[G]] : tensor<4x8xf32>
  %y = fusion.group (%x, %b) {kind = "pointwise", tile = [4, 8], shared_bytes = 0} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%xa: tensor<4x8xf32>, %ba: tensor<8xf32>):
    %s = nn.add %xa, %ba : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %r = nn.relu %s : tensor<4x8xf32>
    fusion.yield %r : tensor<4x8xf32>
  }
  func.return %y : tensor<4x8xf32>
}

// A multi-output (horizontal) group: results bind in yield order.

// CHECK-LABEL: func.func @multiple_results
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32>)
func.func @multiple_results(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // CHECK-NEXT: %[[P:[^,]*]], %[[Q:.*]] = fusion.group (%[[X]]) {kind = "pointwise", schedule = {vector = 4, rows = [1, 2]}, est_registers = 32} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // CHECK-NEXT: ^{{.*}}(%[[XA:[^:]*]]: tensor<4xf32>):
  // CHECK-NEXT:   %[[E:.*]] = nn.exp %[[XA]] : tensor<4xf32>
  // CHECK-NEXT:   %[[T:.*]] = nn.tanh %[[XA]] : tensor<4xf32>
  // CHECK-NEXT:   fusion.yield %[[E]], %[[T]] : tensor<4xf32>, tensor<4xf32>
  // CHECK-NEXT: }
  // CHECK-NEXT: func.return %[[Q]], %[[P]] : tensor<4xf32>, tensor<4xf32>
  %p, %q = fusion.group (%x) {kind = "pointwise", schedule = {vector = 4, rows = [1, 2]}, est_registers = 32} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%xa: tensor<4xf32>):
    %e = nn.exp %xa : tensor<4xf32>
    %t = nn.tanh %xa : tensor<4xf32>
    fusion.yield %e, %t : tensor<4xf32>, tensor<4xf32>
  }
  func.return %q, %p : tensor<4xf32>, tensor<4xf32>
}

// Groups chain: one group's result is the next one's operand. A group with no
// operands has an entry block without arguments.

// CHECK-LABEL: func.func @chained_groups
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32>)
func.func @chained_groups(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK-NEXT: %[[C:.*]] = fusion.group () : () -> tensor<4xf32> {
  // CHECK-NEXT:   %[[K:.*]] = nn.constant dense<2.0> : tensor<4xf32>
  // CHECK-NEXT:   fusion.yield %[[K]] : tensor<4xf32>
  // CHECK-NEXT: }
  // CHECK-NEXT: %[[M:.*]] = fusion.group (%[[X]], %[[C]]) {kind = "pointwise"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  // CHECK-NEXT: ^{{.*}}(%[[XA:[^:]*]]: tensor<4xf32>, %[[CA:[^:]*]]: tensor<4xf32>):
  // CHECK-NEXT:   %[[MUL:.*]] = nn.mul %[[XA]], %[[CA]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK-NEXT:   fusion.yield %[[MUL]] : tensor<4xf32>
  // CHECK-NEXT: }
  // CHECK-NEXT: func.return %[[M]] : tensor<4xf32>
  %c = fusion.group () : () -> tensor<4xf32> {
    %k = nn.constant dense<2.0> : tensor<4xf32>
    fusion.yield %k : tensor<4xf32>
  }
  %m = fusion.group (%x, %c) {kind = "pointwise"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%xa: tensor<4xf32>, %ca: tensor<4xf32>):
    %mul = nn.mul %xa, %ca : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    fusion.yield %mul : tensor<4xf32>
  }
  func.return %m : tensor<4xf32>
}
