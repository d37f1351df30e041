// RUN: fusec %s -p "" --split-input-file --verify-diagnostics | filecheck %s

// softmax, log_softmax, layer_norm, rms_norm, batch_norm: axis, parameter
// shapes and element types, positive epsilon.

func.func @softmax_axis_out_of_range(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_composites.mlir:[[# @LINE + 1]]:3: error: 'nn.softmax' op axis 2 is out of range for rank 2 (expected -2 to 1)
  %0 = nn.softmax %x {axis = 2} : tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @log_softmax_of_integers(%x: tensor<4x8xi32>) -> tensor<4x8xi32> {
  // CHECK: {{.*}}invalid_composites.mlir:[[# @LINE + 1]]:3: error: 'nn.log_softmax' op operand #0 must have floating-point elements, got i32
  %0 = nn.log_softmax %x : tensor<4x8xi32>
  func.return %0 : tensor<4x8xi32>
}

// -----

func.func @softmax_result_type(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // CHECK: {{.*}}invalid_composites.mlir:[[# @LINE + 1]]:3: error: 'nn.softmax' op result type tensor<8x4xf32> must equal the operand type tensor<4x8xf32>
  %0 = nn.softmax %x : (tensor<4x8xf32>) -> tensor<8x4xf32>
  func.return %0 : tensor<8x4xf32>
}

// -----

func.func @layer_norm_scale_shape(%x: tensor<4x8xf32>, %g: tensor<4xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_composites.mlir:[[# @LINE + 1]]:3: error: 'nn.layer_norm' op operand #1 has shape 4, expected 8 (the dimensions from axis 1 on)
  %0 = nn.layer_norm %x, %g, %b : (tensor<4x8xf32>, tensor<4xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @layer_norm_bias_shape(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<1x8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_composites.mlir:[[# @LINE + 1]]:3: error: 'nn.layer_norm' op operand #2 has shape 1x8, expected 8 (the dimensions from axis 1 on)
  %0 = nn.layer_norm %x, %g, %b : (tensor<4x8xf32>, tensor<8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @layer_norm_axis_zero(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_composites.mlir:[[# @LINE + 1]]:3: error: 'nn.layer_norm' op operand #1 has shape 8, expected 4x8 (the dimensions from axis 0 on)
  %0 = nn.layer_norm %x, %g, %g {axis = 0} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @layer_norm_axis_out_of_range(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_composites.mlir:[[# @LINE + 1]]:3: error: 'nn.layer_norm' op axis 2 is out of range for rank 2 (expected -2 to 1)
  %0 = nn.layer_norm %x, %g, %g {axis = 2} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @layer_norm_zero_epsilon(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_composites.mlir:[[# @LINE + 1]]:3: error: 'nn.layer_norm' op epsilon must be positive, got 0.0
  %0 = nn.layer_norm %x, %g, %g {epsilon = 0.0} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @layer_norm_epsilon_not_a_number(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_composites.mlir:[[# @LINE + 1]]:3: error: 'nn.layer_norm' op attribute 'epsilon' must be a number
  %0 = nn.layer_norm %x, %g, %g {epsilon = "small"} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @layer_norm_parameter_element_type(%x: tensor<4x8xf32>, %g: tensor<8xf16>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_composites.mlir:[[# @LINE + 1]]:3: error: 'nn.layer_norm' op operand #1 has element type f16, expected f32 (that of operand #0)
  %0 = nn.layer_norm %x, %g, %g : (tensor<4x8xf32>, tensor<8xf16>, tensor<8xf16>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @layer_norm_result_type(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf16> {
  // CHECK: {{.*}}invalid_composites.mlir:[[# @LINE + 1]]:3: error: 'nn.layer_norm' op result type tensor<4x8xf16> must equal the type of operand #0, tensor<4x8xf32>
  %0 = nn.layer_norm %x, %g, %g : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf16>
  func.return %0 : tensor<4x8xf16>
}

// -----

func.func @rms_norm_scale_shape(%x: tensor<4x8xf32>, %g: tensor<4xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_composites.mlir:[[# @LINE + 1]]:3: error: 'nn.rms_norm' op operand #1 has shape 4, expected 8 (the dimensions from axis 1 on)
  %0 = nn.rms_norm %x, %g : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @rms_norm_negative_epsilon(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_composites.mlir:[[# @LINE + 1]]:3: error: 'nn.rms_norm' op epsilon must be positive, got -1.0e-06
  %0 = nn.rms_norm %x, %g {epsilon = -1.0e-06} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @rms_norm_of_integers(%x: tensor<4x8xi32>, %g: tensor<8xi32>) -> tensor<4x8xi32> {
  // CHECK: {{.*}}invalid_composites.mlir:[[# @LINE + 1]]:3: error: 'nn.rms_norm' op operand #0 must have floating-point elements, got i32
  %0 = nn.rms_norm %x, %g : (tensor<4x8xi32>, tensor<8xi32>) -> tensor<4x8xi32>
  func.return %0 : tensor<4x8xi32>
}

// -----

func.func @batch_norm_mean_shape(%x: tensor<2x3x4x4xf32>, %c: tensor<3xf32>, %d: tensor<4xf32>) -> tensor<2x3x4x4xf32> {
  // CHECK: {{.*}}invalid_composites.mlir:[[# @LINE + 1]]:3: error: 'nn.batch_norm' op mean (operand #3) has shape 4, expected 3 (the channel count)
  %0 = nn.batch_norm %x, %c, %c, %d, %c : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  func.return %0 : tensor<2x3x4x4xf32>
}

// -----

func.func @batch_norm_scale_element_type(%x: tensor<2x3x4x4xf32>, %c: tensor<3xf32>, %h: tensor<3xf16>) -> tensor<2x3x4x4xf32> {
  // CHECK: {{.*}}invalid_composites.mlir:[[# @LINE + 1]]:3: error: 'nn.batch_norm' op scale (operand #1) has element type f16, expected f32 (that of the input)
  %0 = nn.batch_norm %x, %h, %c, %c, %c : (tensor<2x3x4x4xf32>, tensor<3xf16>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  func.return %0 : tensor<2x3x4x4xf32>
}

// -----

func.func @batch_norm_zero_epsilon(%x: tensor<2x3x4x4xf32>, %c: tensor<3xf32>) -> tensor<2x3x4x4xf32> {
  // CHECK: {{.*}}invalid_composites.mlir:[[# @LINE + 1]]:3: error: 'nn.batch_norm' op epsilon must be positive, got 0.0
  %0 = nn.batch_norm %x, %c, %c, %c, %c {epsilon = 0.0 : f32} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  func.return %0 : tensor<2x3x4x4xf32>
}

// -----

func.func @batch_norm_rank_one(%x: tensor<4xf32>, %c: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_composites.mlir:[[# @LINE + 1]]:3: error: 'nn.batch_norm' op input must have rank >= 2 (N, C, ...), got 4
  %0 = nn.batch_norm %x, %c, %c, %c, %c : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
