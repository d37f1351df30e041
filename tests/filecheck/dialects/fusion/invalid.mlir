// RUN: fusec %s -p "" --split-input-file --verify-diagnostics | filecheck %s

// fusion.group: block arguments match the operands, the body sees only them,
// it ends in a fusion.yield of the result types; fusion.yield lives only there.

func.func @argument_count(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'fusion.group' op has 1 operand(s) but its body block has 2 argument(s); they must match one to one
  %y = fusion.group (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    fusion.yield %a : tensor<4xf32>
  }
  func.return %y : tensor<4xf32>
}

// -----

func.func @argument_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'fusion.group' op block argument #0 has type tensor<8xf32> but operand #0 has type tensor<4xf32>
  %y = fusion.group (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<8xf32>):
    %s = nn.reduce_sum %a {axes = [0], keepdims = true} : (tensor<8xf32>) -> tensor<1xf32>
    %r = nn.broadcast_to %s : (tensor<1xf32>) -> tensor<4xf32>
    fusion.yield %r : tensor<4xf32>
  }
  func.return %y : tensor<4xf32>
}

// -----

func.func @value_from_outside(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'fusion.group' op body uses %x (in 'nn.add'), which is defined outside the group; pass it in as an operand
  %y = fusion.group (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %e = nn.add %a, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    fusion.yield %e : tensor<4xf32>
  }
  func.return %y : tensor<4xf32>
}

// -----

func.func @missing_yield(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'fusion.group' op body must end with fusion.yield
  %y = fusion.group (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %e = nn.exp %a : tensor<4xf32>
  }
  func.return %y : tensor<4xf32>
}

// -----

func.func @yield_not_last(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'fusion.group' op body must end with fusion.yield
  %y = fusion.group (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    fusion.yield %a : tensor<4xf32>
    %e = nn.exp %a : tensor<4xf32>
  }
  func.return %y : tensor<4xf32>
}

// -----

func.func @yield_types(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'fusion.group' op fusion.yield gives (tensor<4xf32>, tensor<4xf32>) but the group's results are (tensor<4xf32>)
  %y = fusion.group (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %e = nn.exp %a : tensor<4xf32>
    fusion.yield %e, %e : tensor<4xf32>, tensor<4xf32>
  }
  func.return %y : tensor<4xf32>
}

// -----

func.func @two_blocks(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'fusion.group' op region 'body' at position 0 expected a single block, but got 2 blocks
  %y = fusion.group (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    fusion.yield %a : tensor<4xf32>
  ^bb1:
    fusion.yield %a : tensor<4xf32>
  }
  func.return %y : tensor<4xf32>
}

// -----

func.func @empty_body(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'fusion.group' op region 'body' at position 0 expected a single block, but got 0 blocks
  %y = fusion.group (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  }
  func.return %y : tensor<4xf32>
}

// -----

func.func @yield_outside_group(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:3: error: 'fusion.yield' expects parent op 'fusion.group'
  fusion.yield %x : tensor<4xf32>
}

// -----

func.func @invalid_op_inside(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = fusion.group (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:5: error: 'nn.add' op result shape 8 does not match the expected 4
    %e = nn.add %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
    fusion.yield %a : tensor<4xf32>
  }
  func.return %y : tensor<4xf32>
}

// -----

func.func @cycle_inside(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = fusion.group (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:5: error: 'nn.exp' op uses %f, which depends on this op's own result: the operands form a cycle
    %e = nn.exp %f : tensor<4xf32>
    %f = nn.exp %e : tensor<4xf32>
    fusion.yield %f : tensor<4xf32>
  }
  func.return %y : tensor<4xf32>
}

// -----

func.func @value_of_another_group(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = fusion.group (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %e = nn.exp %a : tensor<4xf32>
    fusion.yield %e : tensor<4xf32>
  }
  %z = fusion.group (%y) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%b: tensor<4xf32>):
    // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:18: error: use of undefined value %e
    fusion.yield %e : tensor<4xf32>
  }
  func.return %z : tensor<4xf32>
}

// -----

func.func @missing_parentheses(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid.mlir:[[# @LINE + 1]]:21: error: 'fusion.group' expects its operands in parentheses: fusion.group (%x, %y)
  %y = fusion.group %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    fusion.yield %a : tensor<4xf32>
  }
  func.return %y : tensor<4xf32>
}
