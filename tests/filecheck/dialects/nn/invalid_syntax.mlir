// RUN: fusec %s -p "" --split-input-file --verify-diagnostics | filecheck %s

// Parse errors and the checks xDSL does not make (every use dominated by its
// definition): each is reported at its source position.

func.func @too_few_operands(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:15: error: 'nn.add' expects 2 operands, got 1
  %0 = nn.add %x : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @too_many_operands(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:15: error: 'nn.exp' expects 1 operand, got 2
  %0 = nn.exp %x, %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @too_few_operands_generic(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:3: error: 'nn.add' op expected 2 operands, but got 1
  %0 = "nn.add"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @too_many_operands_generic(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:3: error: 'nn.exp' op expected 1 operand, but got 2
  %0 = "nn.exp"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @too_few_operand_types(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:24: error: 'nn.add' has 2 operands but its type lists 1 operand type
  %0 = nn.add %x, %x : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @too_many_operand_types(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:23: error: 'nn.concat' has 1 operand but its type lists 2 operand types
  %0 = nn.concat %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @unknown_op_close_to_a_known_one(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:8: error: unknown op 'nn.relu6'; did you mean 'nn.relu'?
  %0 = nn.relu6 %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @unknown_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:8: error: unknown op 'nn.frobnicate' (the nn dialect has no op of that name)
  %0 = nn.frobnicate %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @unknown_dialect(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:9: error: unknown op 'torch.relu' (fusec knows the builtin, func, nn and fusion dialects)
  %0 = "torch.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @undefined_value(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:15: error: use of undefined value %y
  %0 = nn.exp %y : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @use_before_definition(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:3: error: 'nn.exp' op uses %b before it is defined
  %a = nn.exp %b : tensor<4xf32>
  %b = nn.exp %x : tensor<4xf32>
  func.return %a : tensor<4xf32>
}

// -----

func.func @numbered_use_before_definition(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:3: error: 'nn.add' op uses operand #1 before it is defined
  %0 = nn.add %x, %1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = nn.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @cycle(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:3: error: 'nn.exp' op uses %b, which depends on this op's own result: the operands form a cycle
  %a = nn.exp %b : tensor<4xf32>
  %b = nn.exp %a : tensor<4xf32>
  func.return %b : tensor<4xf32>
}

// -----

func.func @self_cycle(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:3: error: 'nn.add' op uses %a, which depends on this op's own result: the operands form a cycle
  %a = nn.add %x, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %a : tensor<4xf32>
}

// -----

func.func @missing_colon(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:18: error: Expected ':' before the type of 'nn.exp'
  %0 = nn.exp %x tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @redefined_value(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.exp %x : tensor<4xf32>
  // CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:3: error: SSA value %0 is already defined
  %0 = nn.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @operand_type_differs_from_definition(%x: tensor<4xf32>) -> tensor<8xf32> {
  // CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:15: error: %x has type tensor<4xf32> but is used here as tensor<8xf32>
  %0 = nn.exp %x : tensor<8xf32>
  func.return %0 : tensor<8xf32>
}

// -----

func.func @twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
// CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:1: error: 'func.func' op redefines @twice (first defined at {{.*}}invalid_syntax.mlir:[[# @LINE - 3]]:1)
func.func @twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}

// -----

// CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:1: error: expected an operation such as func.func here
42

// -----

// CHECK: {{.*}}invalid_syntax.mlir:[[# @LINE + 1]]:64: error: this '{' is never closed: the input ends before its '}'
func.func @unclosed_region(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
