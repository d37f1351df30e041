// RUN: fusec %s -p "" --split-input-file --verify-diagnostics | filecheck %s

// matmul, conv2d and the pools: contraction sizes, batch broadcasting, window
// attributes, channel groups and output sizes.

func.func @matmul_k_mismatch(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.matmul' op contraction sizes differ: lhs 4x8 has K = 8, rhs 4x8 has K = 4
  %0 = nn.matmul %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

func.func @matmul_batch_mismatch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x4xf32>) -> tensor<2x4x4xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.matmul' op batch dimensions do not broadcast: shapes 2, 3 do not broadcast (dimension -1 has sizes [2, 3])
  %0 = nn.matmul %a, %b : (tensor<2x4x8xf32>, tensor<3x8x4xf32>) -> tensor<2x4x4xf32>
  func.return %0 : tensor<2x4x4xf32>
}

// -----

func.func @matmul_rank_one(%a: tensor<8xf32>, %b: tensor<8x4xf32>) -> tensor<4xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.matmul' op operands must have rank >= 2, got 8 and 8x4
  %0 = nn.matmul %a, %b : (tensor<8xf32>, tensor<8x4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @matmul_result_shape(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x5xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.matmul' op result shape 4x5 does not match the expected 4x4
  %0 = nn.matmul %a, %b : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x5xf32>
  func.return %0 : tensor<4x5xf32>
}

// -----

func.func @matmul_of_integers(%a: tensor<4x8xi32>, %b: tensor<8x4xi32>) -> tensor<4x4xi32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.matmul' op operand #0 must have floating-point elements, got i32
  %0 = nn.matmul %a, %b : (tensor<4x8xi32>, tensor<8x4xi32>) -> tensor<4x4xi32>
  func.return %0 : tensor<4x4xi32>
}

// -----

func.func @matmul_mixed_types(%a: tensor<4x8xf32>, %b: tensor<8x4xf16>) -> tensor<4x4xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.matmul' op operand element types differ: f32 and f16
  %0 = nn.matmul %a, %b : (tensor<4x8xf32>, tensor<8x4xf16>) -> tensor<4x4xf32>
  func.return %0 : tensor<4x4xf32>
}

// -----

func.func @conv2d_output_size(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.conv2d' op result shape 1x4x8x8 does not match the expected 1x4x6x6
  %0 = nn.conv2d %x, %w : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  func.return %0 : tensor<1x4x8x8xf32>
}

// -----

func.func @conv2d_zero_stride(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.conv2d' op attribute 'strides' entries must be >= 1, got [0, 1]
  %0 = nn.conv2d %x, %w {strides = [0, 1]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv2d_zero_dilation(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.conv2d' op attribute 'dilations' entries must be >= 1, got [1, 0]
  %0 = nn.conv2d %x, %w {dilations = [1, 0]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv2d_groups_input_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x1x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.conv2d' op groups = 2 does not divide the 3 input channels
  %0 = nn.conv2d %x, %w {groups = 2} : (tensor<1x3x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv2d_groups_output_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x6x6xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.conv2d' op groups = 2 does not divide the 3 output channels
  %0 = nn.conv2d %x, %w {groups = 2} : (tensor<1x4x8x8xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x6x6xf32>
  func.return %0 : tensor<1x3x6x6xf32>
}

// -----

func.func @conv2d_zero_groups(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.conv2d' op groups must be >= 1, got 0
  %0 = nn.conv2d %x, %w {groups = 0} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv2d_weight_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.conv2d' op weight has 3 input channels per group, expected 4 (4 input channels / groups = 1)
  %0 = nn.conv2d %x, %w : (tensor<1x4x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv2d_pads_length(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.conv2d' op attribute 'pads' must have 4 entries [top, left, bottom, right], got 2
  %0 = nn.conv2d %x, %w {pads = [1, 1]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  func.return %0 : tensor<1x4x8x8xf32>
}

// -----

func.func @conv2d_negative_pad(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.conv2d' op attribute 'pads' entries must be >= 0, got [-1, 0, 0, 0]
  %0 = nn.conv2d %x, %w {pads = [-1, 0, 0, 0]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv2d_strides_length(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.conv2d' op attribute 'strides' must have 2 entries (H, W), got 3
  %0 = nn.conv2d %x, %w {strides = [1, 1, 1]} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv2d_kernel_too_large(%x: tensor<1x3x2x2xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x1x1xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.conv2d' op the 3x3 kernel does not fit the padded 2x2 input (output would be 0x0)
  %0 = nn.conv2d %x, %w : (tensor<1x3x2x2xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x1x1xf32>
  func.return %0 : tensor<1x4x1x1xf32>
}

// -----

func.func @conv2d_rank(%x: tensor<3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<4x6x6xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.conv2d' op input and weight must have rank 4, got 3x8x8 and 4x3x3x3
  %0 = nn.conv2d %x, %w : (tensor<3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<4x6x6xf32>
  func.return %0 : tensor<4x6x6xf32>
}

// -----

func.func @conv2d_of_integers(%x: tensor<1x3x8x8xi32>, %w: tensor<4x3x3x3xi32>) -> tensor<1x4x6x6xi32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.conv2d' op operand #0 must have floating-point elements, got i32
  %0 = nn.conv2d %x, %w : (tensor<1x3x8x8xi32>, tensor<4x3x3x3xi32>) -> tensor<1x4x6x6xi32>
  func.return %0 : tensor<1x4x6x6xi32>
}

// -----

func.func @pool_pad_not_below_kernel(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.max_pool2d' op pads [3, 1, 1, 1] must be smaller than the 3x3 window, or some windows would hold only padding
  %0 = nn.max_pool2d %x {kernel = [3, 3], pads = [3, 1, 1, 1]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  func.return %0 : tensor<1x3x8x8xf32>
}

// -----

func.func @pool_right_pad_not_below_kernel(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x8x9xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.avg_pool2d' op pads [0, 0, 0, 2] must be smaller than the 3x2 window, or some windows would hold only padding
  %0 = nn.avg_pool2d %x {kernel = [3, 2], pads = [0, 0, 0, 2]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x9xf32>
  func.return %0 : tensor<1x3x8x9xf32>
}

// -----

func.func @pool_zero_stride(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.avg_pool2d' op attribute 'strides' entries must be >= 1, got [0, 0]
  %0 = nn.avg_pool2d %x {kernel = [3, 3], strides = [0, 0]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  func.return %0 : tensor<1x3x8x8xf32>
}

// -----

func.func @pool_zero_kernel(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x6x6xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.max_pool2d' op attribute 'kernel' entries must be >= 1, got [0, 3]
  %0 = nn.max_pool2d %x {kernel = [0, 3]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x6x6xf32>
  func.return %0 : tensor<1x3x6x6xf32>
}

// -----

func.func @pool_output_size(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.avg_pool2d' op result shape 1x3x8x8 does not match the expected 1x3x7x7
  %0 = nn.avg_pool2d %x {kernel = [2, 2]} : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
  func.return %0 : tensor<1x3x8x8xf32>
}

// -----

func.func @pool_window_too_large(%x: tensor<1x3x2x2xf32>) -> tensor<1x3x1x1xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.max_pool2d' op the 3x3 window does not fit the padded 2x2 input
  %0 = nn.max_pool2d %x : (tensor<1x3x2x2xf32>) -> tensor<1x3x1x1xf32>
  func.return %0 : tensor<1x3x1x1xf32>
}

// -----

func.func @pool_rank(%x: tensor<3x8x8xf32>) -> tensor<3x6x6xf32> {
  // CHECK: {{.*}}invalid_contractions_windows.mlir:[[# @LINE + 1]]:3: error: 'nn.avg_pool2d' op input must have rank 4 (NCHW), got 3x8x8
  %0 = nn.avg_pool2d %x : (tensor<3x8x8xf32>) -> tensor<3x6x6xf32>
  func.return %0 : tensor<3x6x6xf32>
}
