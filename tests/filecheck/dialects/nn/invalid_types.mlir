// RUN: fusec %s -p "" --split-input-file --verify-diagnostics | filecheck %s

// Only ranked, statically shaped tensors of f16, bf16, f32, f64, i1, i32 and
// i64, in function signatures and in ops; the fusion contract is "never" or
// "must".

// CHECK: {{.*}}invalid_types.mlir:[[# @LINE + 1]]:1: error: element type i8 is not supported (argument #0 of @i8_argument has type tensor<4xi8>); use one of bf16, f16, f32, f64, i1, i32, i64
func.func @i8_argument(%a: tensor<4xi8>) -> tensor<4xi8> {
  func.return %a : tensor<4xi8>
}

// -----

// CHECK: {{.*}}invalid_types.mlir:[[# @LINE + 1]]:1: error: element type f80 is not supported (argument #0 of @f80_argument has type tensor<4xf80>); use one of bf16, f16, f32, f64, i1, i32, i64
func.func @f80_argument(%a: tensor<4xf80>) -> tensor<4xf80> {
  func.return %a : tensor<4xf80>
}

// -----

// CHECK: {{.*}}invalid_types.mlir:[[# @LINE + 1]]:1: error: element type complex<f32> is not supported (argument #0 of @complex_argument has type tensor<4xcomplex<f32>>); use one of bf16, f16, f32, f64, i1, i32, i64
func.func @complex_argument(%a: tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>> {
  func.return %a : tensor<4xcomplex<f32>>
}

// -----

// CHECK: {{.*}}invalid_types.mlir:[[# @LINE + 1]]:1: error: element type ui32 is not supported (argument #0 of @unsigned_argument has type tensor<4xui32>); use one of bf16, f16, f32, f64, i1, i32, i64
func.func @unsigned_argument(%a: tensor<4xui32>) -> tensor<4xui32> {
  func.return %a : tensor<4xui32>
}

// -----

// CHECK: {{.*}}invalid_types.mlir:[[# @LINE + 1]]:1: error: element type index is not supported (argument #0 of @index_argument has type tensor<4xindex>); use one of bf16, f16, f32, f64, i1, i32, i64
func.func @index_argument(%a: tensor<4xindex>) -> tensor<4xindex> {
  func.return %a : tensor<4xindex>
}

// -----

// CHECK: {{.*}}invalid_types.mlir:[[# @LINE + 1]]:1: error: element type i8 is not supported (result #0 of @i8_result has type tensor<4xi8>); use one of bf16, f16, f32, f64, i1, i32, i64
func.func @i8_result(%a: tensor<4xf32>) -> tensor<4xi8> {
  %0 = nn.cast %a : (tensor<4xf32>) -> tensor<4xi8>
  func.return %0 : tensor<4xi8>
}

// -----

func.func @i8_inside(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_types.mlir:[[# @LINE + 1]]:3: error: 'nn.cast' op element type i8 is not supported (the result has type tensor<4xi8>); use one of bf16, f16, f32, f64, i1, i32, i64
  %0 = nn.cast %a : (tensor<4xf32>) -> tensor<4xi8>
  %1 = nn.cast %0 : (tensor<4xi8>) -> tensor<4xf32>
  func.return %1 : tensor<4xf32>
}

// -----

// CHECK: {{.*}}invalid_types.mlir:[[# @LINE + 1]]:1: error: dynamic shapes are not supported: argument #0 of @dynamic_argument has type tensor<?x4xf32>
func.func @dynamic_argument(%a: tensor<?x4xf32>) -> tensor<4xf32> {
  %0 = nn.reduce_sum %a {axes = [0]} : (tensor<?x4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// CHECK: {{.*}}invalid_types.mlir:[[# @LINE + 1]]:1: error: dynamic shapes are not supported: result #0 of @dynamic_result has type tensor<?x4xf32>
func.func @dynamic_result(%a: tensor<8x4xf32>) -> tensor<?x4xf32> {
  %0 = nn.exp %a : (tensor<8x4xf32>) -> tensor<?x4xf32>
  func.return %0 : tensor<?x4xf32>
}

// -----

func.func @dynamic_inside(%a: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // CHECK: {{.*}}invalid_types.mlir:[[# @LINE + 1]]:3: error: 'nn.reshape' op dynamic shapes are not supported: the result has type tensor<?x4xf32>
  %0 = nn.reshape %a : (tensor<8x4xf32>) -> tensor<?x4xf32>
  %1 = nn.reshape %0 : (tensor<?x4xf32>) -> tensor<8x4xf32>
  func.return %1 : tensor<8x4xf32>
}

// -----

// CHECK: {{.*}}invalid_types.mlir:[[# @LINE + 1]]:1: error: argument #0 of @unranked_argument must be a ranked tensor, got tensor<*xf32>
func.func @unranked_argument(%a: tensor<*xf32>) -> tensor<*xf32> {
  func.return %a : tensor<*xf32>
}

// -----

// CHECK: {{.*}}invalid_types.mlir:[[# @LINE + 1]]:1: error: argument #0 of @memref_argument must be a ranked tensor, got memref<4xf32>
func.func @memref_argument(%a: memref<4xf32>) -> memref<4xf32> {
  func.return %a : memref<4xf32>
}

// -----

// CHECK: {{.*}}invalid_types.mlir:[[# @LINE + 1]]:1: error: argument #0 of @scalar_argument must be a ranked tensor, got f32
func.func @scalar_argument(%a: f32) -> f32 {
  func.return %a : f32
}

// -----

func.func @fusion_contract_value(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_types.mlir:[[# @LINE + 1]]:3: error: 'nn.exp' op attribute 'fusion' must be "never" or "must"
  %0 = nn.exp %a {fusion = "sometimes"} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @fusion_contract_type(%a: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_types.mlir:[[# @LINE + 1]]:3: error: 'nn.relu' op attribute 'fusion' must be a string
  %0 = nn.relu %a {fusion = true} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @return_type_mismatch(%a: tensor<4xf32>) -> tensor<8xf32> {
  // CHECK: {{.*}}invalid_types.mlir:[[# @LINE + 1]]:3: error: 'func.return' op expected arguments to have the same types as the function output types: expected [tensor<8xf32>], got [tensor<4xf32>]
  func.return %a : tensor<4xf32>
}
