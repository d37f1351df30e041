// RUN: fusec %s -p "" | filecheck %s --enable-var-scope
// RUN: fusec %s -p "" --print-op-generic | fusec - -p "" | filecheck %s --enable-var-scope

// matmul is NumPy matmul for rank >= 2: batch dimensions broadcast.

// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[A:[^:]*]]: tensor<4x8xf32>, %[[B:[^:]*]]: tensor<8x16xf32>, %[[BA:[^:]*]]: tensor<2x1x4x8xf32>, %[[BB:[^:]*]]: tensor<3x8x16xf32>)
func.func @matmul(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %ba: tensor<2x1x4x8xf32>, %bb: tensor<3x8x16xf32>) -> (tensor<4x16xf32>, tensor<2x3x4x16xf32>, tensor<3x4x16xf32>) {
  // CHECK-NEXT: %[[C:.*]] = nn.matmul %[[A]], %[[B]] : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  // CHECK-NEXT: %[[BC:.*]] = nn.matmul %[[BA]], %[[BB]] : (tensor<2x1x4x8xf32>, tensor<3x8x16xf32>) -> tensor<2x3x4x16xf32>
  // CHECK-NEXT: %[[MIX:.*]] = nn.matmul %[[A]], %[[BB]] : (tensor<4x8xf32>, tensor<3x8x16xf32>) -> tensor<3x4x16xf32>
  // CHECK-NEXT: func.return %[[C]], %[[BC]], %[[MIX]]
  %c = nn.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %bc = nn.matmul %ba, %bb : (tensor<2x1x4x8xf32>, tensor<3x8x16xf32>) -> tensor<2x3x4x16xf32>
  %mix = nn.matmul %a, %bb : (tensor<4x8xf32>, tensor<3x8x16xf32>) -> tensor<3x4x16xf32>
  func.return %c, %bc, %mix : tensor<4x16xf32>, tensor<2x3x4x16xf32>, tensor<3x4x16xf32>
}

// CHECK-LABEL: func.func @matmul_f16
// CHECK-SAME: (%[[A:[^:]*]]: tensor<4x8xf16>, %[[B:[^:]*]]: tensor<8x2xf16>)
func.func @matmul_f16(%a: tensor<4x8xf16>, %b: tensor<8x2xf16>) -> tensor<4x2xf16> {
  // CHECK-NEXT: %[[C:.*]] = nn.matmul %[[A]], %[[B]] : (tensor<4x8xf16>, tensor<8x2xf16>) -> tensor<4x2xf16>
  // CHECK-NEXT: func.return %[[C]]
  %c = nn.matmul %a, %b : (tensor<4x8xf16>, tensor<8x2xf16>) -> tensor<4x2xf16>
  func.return %c : tensor<4x2xf16>
}

// conv2d: defaults omitted, every attribute given, grouped (depthwise) with
// asymmetric pads, strides and dilations.

// CHECK-LABEL: func.func @conv2d
// CHECK-SAME: (%[[X:[^:]*]]: tensor<1x4x8x8xf32>, %[[W:[^:]*]]: tensor<6x4x3x3xf32>, %[[DW:[^:]*]]: tensor<4x1x3x3xf32>, %[[GW:[^:]*]]: tensor<6x2x1x1xf32>)
func.func @conv2d(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>, %dw: tensor<4x1x3x3xf32>, %gw: tensor<6x2x1x1xf32>) -> (tensor<1x6x6x6xf32>, tensor<1x6x8x8xf32>, tensor<1x4x4x3xf32>, tensor<1x6x8x8xf32>) {
  // CHECK-NEXT: %[[C0:.*]] = nn.conv2d %[[X]], %[[W]] : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  // CHECK-NEXT: %[[C1:.*]] = nn.conv2d %[[X]], %[[W]] {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1} : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x8x8xf32>
  // CHECK-NEXT: %[[C2:.*]] = nn.conv2d %[[X]], %[[DW]] {strides = [2, 3], pads = [1, 0, 2, 1], dilations = [2, 1], groups = 4} : (tensor<1x4x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x4x3xf32>
  // CHECK-NEXT: %[[C3:.*]] = nn.conv2d %[[X]], %[[GW]] {groups = 2} : (tensor<1x4x8x8xf32>, tensor<6x2x1x1xf32>) -> tensor<1x6x8x8xf32>
  // CHECK-NEXT: func.return %[[C0]], %[[C1]], %[[C2]], %[[C3]]
  %c0 = nn.conv2d %x, %w : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  %c1 = nn.conv2d %x, %w {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1} : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x8x8xf32>
  %c2 = nn.conv2d %x, %dw {strides = [2, 3], pads = [1, 0, 2, 1], dilations = [2, 1], groups = 4} : (tensor<1x4x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x4x3xf32>
  %c3 = nn.conv2d %x, %gw {groups = 2} : (tensor<1x4x8x8xf32>, tensor<6x2x1x1xf32>) -> tensor<1x6x8x8xf32>
  func.return %c0, %c1, %c2, %c3 : tensor<1x6x6x6xf32>, tensor<1x6x8x8xf32>, tensor<1x4x4x3xf32>, tensor<1x6x8x8xf32>
}

// Pools: the default 3x3 window with stride 1, and explicit kernel, strides
// and pads (each pad smaller than the window).

// CHECK-LABEL: func.func @pools
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x3x8x8xf32>)
func.func @pools(%x: tensor<2x3x8x8xf32>) -> (tensor<2x3x6x6xf32>, tensor<2x3x4x4xf32>, tensor<2x3x8x8xf32>, tensor<2x3x4x3xf32>) {
  // CHECK-NEXT: %[[M0:.*]] = nn.max_pool2d %[[X]] : (tensor<2x3x8x8xf32>) -> tensor<2x3x6x6xf32>
  // CHECK-NEXT: %[[M1:.*]] = nn.max_pool2d %[[X]] {kernel = [2, 2], strides = [2, 2]} : (tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xf32>
  // CHECK-NEXT: %[[A0:.*]] = nn.avg_pool2d %[[X]] {kernel = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1]} : (tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  // CHECK-NEXT: %[[A1:.*]] = nn.avg_pool2d %[[X]] {kernel = [2, 3], strides = [2, 3], pads = [0, 1, 1, 0]} : (tensor<2x3x8x8xf32>) -> tensor<2x3x4x3xf32>
  // CHECK-NEXT: func.return %[[M0]], %[[M1]], %[[A0]], %[[A1]]
  %m0 = nn.max_pool2d %x : (tensor<2x3x8x8xf32>) -> tensor<2x3x6x6xf32>
  %m1 = nn.max_pool2d %x {kernel = [2, 2], strides = [2, 2]} : (tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xf32>
  %a0 = nn.avg_pool2d %x {kernel = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1]} : (tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  %a1 = nn.avg_pool2d %x {kernel = [2, 3], strides = [2, 3], pads = [0, 1, 1, 0]} : (tensor<2x3x8x8xf32>) -> tensor<2x3x4x3xf32>
  func.return %m0, %m1, %a0, %a1 : tensor<2x3x6x6xf32>, tensor<2x3x4x4xf32>, tensor<2x3x8x8xf32>, tensor<2x3x4x3xf32>
}
