// RUN: fusec %s -p "" --split-input-file --verify-diagnostics | filecheck %s

// reshape, broadcast_to, transpose, slice, concat and gather.

func.func @reshape_element_count(%x: tensor<4x8xf32>) -> tensor<5x6xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.reshape' op cannot reshape 4x8 (32 elements) into 5x6 (30 elements)
  %0 = nn.reshape %x : (tensor<4x8xf32>) -> tensor<5x6xf32>
  func.return %0 : tensor<5x6xf32>
}

// -----

func.func @reshape_element_type(%x: tensor<4x8xf32>) -> tensor<32xi32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.reshape' op result element type i32 differs from operand element type f32
  %0 = nn.reshape %x : (tensor<4x8xf32>) -> tensor<32xi32>
  func.return %0 : tensor<32xi32>
}

// -----

func.func @broadcast_to_incompatible(%x: tensor<8xf32>) -> tensor<3x4xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.broadcast_to' op cannot broadcast 8 to 3x4
  %0 = nn.broadcast_to %x : (tensor<8xf32>) -> tensor<3x4xf32>
  func.return %0 : tensor<3x4xf32>
}

// -----

func.func @broadcast_to_lower_rank(%x: tensor<2x8xf32>) -> tensor<8xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.broadcast_to' op cannot broadcast 2x8 to 8
  %0 = nn.broadcast_to %x : (tensor<2x8xf32>) -> tensor<8xf32>
  func.return %0 : tensor<8xf32>
}

// -----

func.func @transpose_not_a_permutation(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.transpose' op perm [0, 0] is not a permutation of 0..1 (the operand has rank 2)
  %0 = nn.transpose %x {perm = [0, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  func.return %0 : tensor<8x4xf32>
}

// -----

func.func @transpose_perm_length(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.transpose' op perm [1, 0, 2] is not a permutation of 0..1 (the operand has rank 2)
  %0 = nn.transpose %x {perm = [1, 0, 2]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  func.return %0 : tensor<8x4xf32>
}

// -----

func.func @transpose_result_shape(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.transpose' op result shape 4x8 does not match the expected 8x4
  %0 = nn.transpose %x {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @transpose_missing_perm(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.transpose' op requires attribute 'perm' (a list of integers)
  %0 = nn.transpose %x : (tensor<4x8xf32>) -> tensor<8x4xf32>
  func.return %0 : tensor<8x4xf32>
}

// -----

func.func @slice_limit_beyond_dimension(%x: tensor<4x8xf32>) -> tensor<4x9xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.slice' op bounds [0, 9) in dimension 1 are outside the dimension's size 8
  %0 = nn.slice %x {starts = [0, 0], limits = [4, 9]} : (tensor<4x8xf32>) -> tensor<4x9xf32>
  func.return %0 : tensor<4x9xf32>
}

// -----

func.func @slice_negative_start(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.slice' op bounds [-1, 4) in dimension 0 are outside the dimension's size 4
  %0 = nn.slice %x {starts = [-1, 0], limits = [4, 8]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @slice_start_after_limit(%x: tensor<4x8xf32>) -> tensor<0x8xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.slice' op start 3 is greater than limit 2 in dimension 0
  %0 = nn.slice %x {starts = [3, 0], limits = [2, 8]} : (tensor<4x8xf32>) -> tensor<0x8xf32>
  func.return %0 : tensor<0x8xf32>
}

// -----

func.func @slice_zero_stride(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.slice' op stride 0 in dimension 1 must be positive
  %0 = nn.slice %x {starts = [0, 0], limits = [4, 8], strides = [1, 0]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @slice_starts_length(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.slice' op attribute 'starts' has 1 entries, expected 2 (one per dimension)
  %0 = nn.slice %x {starts = [0], limits = [4, 8]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @slice_result_shape(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.slice' op result shape 4x8 does not match the expected 4x4
  %0 = nn.slice %x {starts = [0, 0], limits = [4, 8], strides = [1, 2]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @slice_missing_starts(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.slice' op requires attribute 'starts' (a list of integers)
  %0 = nn.slice %x {limits = [4, 8]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @concat_rank(%x: tensor<4x8xf32>, %y: tensor<8xf32>) -> tensor<12x8xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.concat' op operand #1 has rank 1, operand #0 has rank 2
  %0 = nn.concat %x, %y : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<12x8xf32>
  func.return %0 : tensor<12x8xf32>
}

// -----

func.func @concat_other_dims(%x: tensor<4x8xf32>, %y: tensor<4x7xf32>) -> tensor<8x8xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.concat' op operand #1 has size 7 in dimension 1, operand #0 has 8 (only the concat axis 0 may differ)
  %0 = nn.concat %x, %y : (tensor<4x8xf32>, tensor<4x7xf32>) -> tensor<8x8xf32>
  func.return %0 : tensor<8x8xf32>
}

// -----

func.func @concat_element_types(%x: tensor<4x8xf32>, %y: tensor<4x8xf16>) -> tensor<8x8xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.concat' op operand element types differ: f16 and f32
  %0 = nn.concat %x, %y : (tensor<4x8xf32>, tensor<4x8xf16>) -> tensor<8x8xf32>
  func.return %0 : tensor<8x8xf32>
}

// -----

func.func @concat_axis_out_of_range(%x: tensor<4x8xf32>) -> tensor<8x8xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.concat' op axis 2 is out of range for rank 2 (expected -2 to 1)
  %0 = nn.concat %x, %x {axis = 2} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  func.return %0 : tensor<8x8xf32>
}

// -----

func.func @concat_result_shape(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.concat' op result shape 4x8 does not match the expected 8x8
  %0 = nn.concat %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @concat_no_operands() -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.concat' op needs at least one operand
  %0 = nn.concat : () -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @gather_float_indices(%t: tensor<10x8xf32>, %i: tensor<4xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.gather' op operand #1 must have integer (i32 or i64) elements, got f32
  %0 = nn.gather %t, %i : (tensor<10x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @gather_mask_indices(%t: tensor<10x8xf32>, %i: tensor<4xi1>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.gather' op operand #1 must have integer (i32 or i64) elements, got i1
  %0 = nn.gather %t, %i : (tensor<10x8xf32>, tensor<4xi1>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @gather_result_shape(%t: tensor<10x8xf32>, %i: tensor<4xi64>) -> tensor<8x4xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.gather' op result shape 8x4 does not match the expected 4x8
  %0 = nn.gather %t, %i : (tensor<10x8xf32>, tensor<4xi64>) -> tensor<8x4xf32>
  func.return %0 : tensor<8x4xf32>
}

// -----

func.func @gather_axis_out_of_range(%t: tensor<10x8xf32>, %i: tensor<4xi64>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.gather' op axis 2 is out of range for rank 2 (expected -2 to 1)
  %0 = nn.gather %t, %i {axis = 2} : (tensor<10x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @gather_scalar_table(%t: tensor<f32>, %i: tensor<4xi64>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.gather' op the table must have rank >= 1
  %0 = nn.gather %t, %i : (tensor<f32>, tensor<4xi64>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @gather_result_element_type(%t: tensor<10x8xf32>, %i: tensor<4xi64>) -> tensor<4x8xf16> {
  // CHECK: {{.*}}invalid_layout.mlir:[[# @LINE + 1]]:3: error: 'nn.gather' op result element type f16 differs from operand element type f32
  %0 = nn.gather %t, %i : (tensor<10x8xf32>, tensor<4xi64>) -> tensor<4x8xf16>
  func.return %0 : tensor<4x8xf16>
}
