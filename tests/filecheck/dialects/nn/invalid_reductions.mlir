// RUN: fusec %s -p "" --split-input-file --verify-diagnostics | filecheck %s

// Reductions: axes in range, distinct, non-empty; the result shape follows
// keepdims; reduce_mean needs floats.

func.func @axis_out_of_range(%a: tensor<4x8xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_reductions.mlir:[[# @LINE + 1]]:3: error: 'nn.reduce_sum' op axis 2 is out of range for rank 2 (expected -2 to 1)
  %0 = nn.reduce_sum %a {axes = [2]} : (tensor<4x8xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @negative_axis_out_of_range(%a: tensor<4x8xf32>) -> tensor<8xf32> {
  // CHECK: {{.*}}invalid_reductions.mlir:[[# @LINE + 1]]:3: error: 'nn.reduce_max' op axis -3 is out of range for rank 2 (expected -2 to 1)
  %0 = nn.reduce_max %a {axes = [-3]} : (tensor<4x8xf32>) -> tensor<8xf32>
  func.return %0 : tensor<8xf32>
}

// -----

func.func @duplicated_axes(%a: tensor<4x8xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_reductions.mlir:[[# @LINE + 1]]:3: error: 'nn.reduce_sum' op axes [1, -1] name the same dimension twice
  %0 = nn.reduce_sum %a {axes = [1, -1]} : (tensor<4x8xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @empty_axes(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_reductions.mlir:[[# @LINE + 1]]:3: error: 'nn.reduce_min' op attribute 'axes' must name at least one axis
  %0 = nn.reduce_min %a {axes = []} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @missing_axes(%a: tensor<4x8xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_reductions.mlir:[[# @LINE + 1]]:3: error: 'nn.reduce_max' op requires attribute 'axes' (a list of integers)
  %0 = nn.reduce_max %a : (tensor<4x8xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @keepdim_misspelled(%a: tensor<4x8xf32>) -> tensor<4x1xf32> {
  // CHECK: {{.*}}invalid_reductions.mlir:[[# @LINE + 1]]:3: error: 'nn.reduce_sum' op has no attribute 'keepdim'; did you mean 'keepdims'? (its attributes: axes, keepdims, fusion)
  %0 = nn.reduce_sum %a {axes = [1], keepdim = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  func.return %0 : tensor<4x1xf32>
}

// -----

func.func @axes_not_a_list(%a: tensor<4x8xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_reductions.mlir:[[# @LINE + 1]]:3: error: 'nn.reduce_max' op attribute 'axes' must be a list of integers like [1, 2]
  %0 = nn.reduce_max %a {axes = 1} : (tensor<4x8xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @keepdims_result_shape(%a: tensor<4x8xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_reductions.mlir:[[# @LINE + 1]]:3: error: 'nn.reduce_max' op result shape 4 does not match the expected 4x1
  %0 = nn.reduce_max %a {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @dropped_dims_result_shape(%a: tensor<4x8xf32>) -> tensor<4x1xf32> {
  // CHECK: {{.*}}invalid_reductions.mlir:[[# @LINE + 1]]:3: error: 'nn.reduce_sum' op result shape 4x1 does not match the expected 4
  %0 = nn.reduce_sum %a {axes = [1]} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  func.return %0 : tensor<4x1xf32>
}

// -----

func.func @keepdims_not_a_bool(%a: tensor<4x8xf32>) -> tensor<4x1xf32> {
  // CHECK: {{.*}}invalid_reductions.mlir:[[# @LINE + 1]]:3: error: 'nn.reduce_sum' op attribute 'keepdims' must be true or false
  %0 = nn.reduce_sum %a {axes = [1], keepdims = 1} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  func.return %0 : tensor<4x1xf32>
}

// -----

func.func @mean_of_integers(%a: tensor<4x8xi32>) -> tensor<4xi32> {
  // CHECK: {{.*}}invalid_reductions.mlir:[[# @LINE + 1]]:3: error: 'nn.reduce_mean' op operand #0 must have floating-point elements, got i32
  %0 = nn.reduce_mean %a {axes = [1]} : (tensor<4x8xi32>) -> tensor<4xi32>
  func.return %0 : tensor<4xi32>
}

// -----

func.func @sum_of_masks(%a: tensor<4x8xi1>) -> tensor<4xi1> {
  // CHECK: {{.*}}invalid_reductions.mlir:[[# @LINE + 1]]:3: error: 'nn.reduce_sum' op operand #0 must have numeric elements, got i1
  %0 = nn.reduce_sum %a {axes = [1]} : (tensor<4x8xi1>) -> tensor<4xi1>
  func.return %0 : tensor<4xi1>
}

// -----

func.func @result_element_type(%a: tensor<4x8xf32>) -> tensor<4xf16> {
  // CHECK: {{.*}}invalid_reductions.mlir:[[# @LINE + 1]]:3: error: 'nn.reduce_sum' op result element type f16 differs from operand element type f32
  %0 = nn.reduce_sum %a {axes = [1]} : (tensor<4x8xf32>) -> tensor<4xf16>
  func.return %0 : tensor<4xf16>
}
