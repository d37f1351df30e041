// RUN: fusec %s -p "" --split-input-file --verify-diagnostics | filecheck %s

// nn.constant: the value must be a dense elements attribute of the result type.

func.func @constant_type_mismatch() -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_constants.mlir:[[# @LINE + 1]]:3: error: 'nn.constant' op value has type tensor<2xf32> but the result has type tensor<4xf32>
  %0 = "nn.constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @constant_element_type_mismatch() -> tensor<2xf32> {
  // CHECK: {{.*}}invalid_constants.mlir:[[# @LINE + 1]]:3: error: 'nn.constant' op value has type tensor<2xi32> but the result has type tensor<2xf32>
  %0 = "nn.constant"() {value = dense<1> : tensor<2xi32>} : () -> tensor<2xf32>
  func.return %0 : tensor<2xf32>
}

// -----

func.func @constant_without_value() -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_constants.mlir:[[# @LINE + 1]]:3: error: 'nn.constant' op requires attribute 'value', a dense elements attribute like dense<0.5> : tensor<f32>
  %0 = "nn.constant"() : () -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @constant_value_not_dense() -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_constants.mlir:[[# @LINE + 1]]:3: error: 'nn.constant' op requires attribute 'value', a dense elements attribute like dense<0.5> : tensor<f32>
  %0 = "nn.constant"() {value = 1.0 : f32} : () -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @constant_not_dense() -> tensor<f32> {
  // CHECK: {{.*}}invalid_constants.mlir:[[# @LINE + 1]]:20: error: 'nn.constant' expects a dense elements attribute like dense<0.5> : tensor<f32>
  %0 = nn.constant 1.0 : f32
  func.return %0 : tensor<f32>
}

// -----

func.func @constant_wrong_element_count() -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_constants.mlir:[[# @LINE + 1]]:20: error: 'nn.constant' has an invalid value: shape mismatch in dense literal. Expected [4] shape from the type, but got [2] shape.
  %0 = nn.constant dense<[1.0, 2.0]> : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @constant_unsupported_element_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_constants.mlir:[[# @LINE + 1]]:3: error: 'nn.constant' op element type i8 is not supported (the result has type tensor<4xi8>); use one of bf16, f16, f32, f64, i1, i32, i64
  %0 = nn.constant dense<1> : tensor<4xi8>
  func.return %x : tensor<4xf32>
}

// -----

func.func @constant_operands(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_constants.mlir:[[# @LINE + 1]]:20: error: 'nn.constant' takes no operands: write nn.constant dense<0.5> : tensor<f32>
  %0 = nn.constant %x dense<1.0> : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
