// RUN: fusec %s -p "" --split-input-file --verify-diagnostics | filecheck %s

// One case per verifier rule of the elementwise ops; each error names the op,
// its line and column, and what was expected.

func.func @broadcast_mismatch(%a: tensor<4x8xf32>, %b: tensor<3xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.add' op shapes 4x8, 3 do not broadcast (dimension -1 has sizes [3, 8])
  %0 = nn.add %a, %b : (tensor<4x8xf32>, tensor<3xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @broadcast_result_shape(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x4xf32> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.mul' op result shape 4x4 does not match the expected 4x8
  %0 = nn.mul %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x4xf32>
  func.return %0 : tensor<4x4xf32>
}

// -----

func.func @operand_element_types(%a: tensor<4x8xf32>, %b: tensor<8xf16>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.sub' op operand element types differ: f32 and f16
  %0 = nn.sub %a, %b : (tensor<4x8xf32>, tensor<8xf16>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @result_element_type(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf16> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.max' op result element type f16 differs from operand element type f32
  %0 = nn.max %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf16>
  func.return %0 : tensor<4x8xf16>
}

// -----

func.func @exp_of_integers(%a: tensor<4xi32>) -> tensor<4xi32> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.exp' op operand #0 must have floating-point elements, got i32
  %0 = nn.exp %a : tensor<4xi32>
  func.return %0 : tensor<4xi32>
}

// -----

func.func @sin_of_integers(%a: tensor<4xi64>) -> tensor<4xi64> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.sin' op operand #0 must have floating-point elements, got i64
  %0 = nn.sin %a : tensor<4xi64>
  func.return %0 : tensor<4xi64>
}

// -----

func.func @div_of_integers(%a: tensor<4xi64>) -> tensor<4xi64> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.div' op operand #0 must have floating-point elements, got i64
  %0 = nn.div %a, %a : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  func.return %0 : tensor<4xi64>
}

// -----

func.func @pow_of_integers(%a: tensor<4xi32>) -> tensor<4xi32> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.pow' op operand #0 must have floating-point elements, got i32
  %0 = nn.pow %a, %a : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  func.return %0 : tensor<4xi32>
}

// -----

func.func @add_of_masks(%a: tensor<4xi1>) -> tensor<4xi1> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.add' op operand #0 must have numeric elements, got i1
  %0 = nn.add %a, %a : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  func.return %0 : tensor<4xi1>
}

// -----

func.func @unary_result_type(%a: tensor<4xf32>) -> tensor<4xf16> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.tanh' op result type tensor<4xf16> must equal the operand type tensor<4xf32>
  %0 = nn.tanh %a : (tensor<4xf32>) -> tensor<4xf16>
  func.return %0 : tensor<4xf16>
}

// -----

func.func @unary_result_shape(%a: tensor<4xf32>) -> tensor<2x2xf32> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.sigmoid' op result type tensor<2x2xf32> must equal the operand type tensor<4xf32>
  %0 = nn.sigmoid %a : (tensor<4xf32>) -> tensor<2x2xf32>
  func.return %0 : tensor<2x2xf32>
}

// -----

func.func @gelu_unknown_approximation(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.gelu' op unknown approximation "fast"; expected "none" or "tanh"
  %0 = nn.gelu %a {approximate = "fast"} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @gelu_approximation_not_a_string(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.gelu' op attribute 'approximate' must be a string
  %0 = nn.gelu %a {approximate = 1} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// A misspelled attribute would silently take the default: it is an error.
func.func @gelu_misspelled_attribute(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.gelu' op has no attribute 'approx'; did you mean 'approximate'? (its attributes: approximate, fusion)
  %0 = nn.gelu %a {approx = "tanh"} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @unknown_attribute(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.exp' op has no attribute 'scale' (its attributes: fusion)
  %0 = nn.exp %a {scale = 2.0} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @clamp_min_above_max(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.clamp' op min = 6.0 is greater than max = 0.0
  %0 = nn.clamp %a {min = 6.0, max = 0.0} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @clamp_bound_not_a_number(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.clamp' op attribute 'min' must be a number
  %0 = nn.clamp %a {min = "zero"} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @cmp_unknown_predicate(%a: tensor<4xf32>) -> tensor<4xi1> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.cmp' op unknown predicate "lessthan"; expected one of lt, le, gt, ge, eq, ne
  %0 = nn.cmp %a, %a {predicate = "lessthan"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  func.return %0 : tensor<4xi1>
}

// -----

func.func @cmp_missing_predicate(%a: tensor<4xf32>) -> tensor<4xi1> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.cmp' op requires attribute 'predicate' (lt, le, gt, ge, eq or ne)
  %0 = nn.cmp %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  func.return %0 : tensor<4xi1>
}

// -----

func.func @cmp_predicate_not_a_string(%a: tensor<4xf32>) -> tensor<4xi1> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.cmp' op attribute 'predicate' must be a string
  %0 = nn.cmp %a, %a {predicate = 1} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  func.return %0 : tensor<4xi1>
}

// -----

func.func @cmp_result_not_i1(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.cmp' op result must have element type i1
  %0 = nn.cmp %a, %a {predicate = "lt"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @cmp_operand_types(%a: tensor<4xf32>, %b: tensor<4xi32>) -> tensor<4xi1> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.cmp' op operand element types differ: f32 and i32
  %0 = nn.cmp %a, %b {predicate = "eq"} : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xi1>
  func.return %0 : tensor<4xi1>
}

// -----

func.func @cmp_result_shape(%a: tensor<4xf32>, %b: tensor<f32>) -> tensor<1xi1> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.cmp' op result shape 1 does not match the expected 4
  %0 = nn.cmp %a, %b {predicate = "ge"} : (tensor<4xf32>, tensor<f32>) -> tensor<1xi1>
  func.return %0 : tensor<1xi1>
}

// -----

func.func @select_condition_type(%c: tensor<4xf32>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.select' op operand #0 (the condition) must have element type i1
  %0 = nn.select %c, %a, %a : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @select_branch_types(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xi32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.select' op operand element types differ: f32 and i32
  %0 = nn.select %c, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @select_broadcast(%c: tensor<3xi1>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.select' op shapes 3, 4, 4 do not broadcast (dimension -1 has sizes [3, 4])
  %0 = nn.select %c, %a, %a : (tensor<3xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @cast_shape(%a: tensor<4xf32>) -> tensor<8xf16> {
  // CHECK: {{.*}}invalid_elementwise.mlir:[[# @LINE + 1]]:3: error: 'nn.cast' op result shape 8 does not match the expected 4
  %0 = nn.cast %a : (tensor<4xf32>) -> tensor<8xf16>
  func.return %0 : tensor<8xf16>
}
