// RUN: fusec %s -p 'tile-and-promote{shared_memory_limit=4096}' | filecheck %s
// RUN: fusec %s -p 'tile-and-promote{shared_memory_limit=4096}' --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// A 1x1 conv is a GEMM over the pixels: 128 pixels x 64 channels per block,
// 4x8 per thread. Its 16 input channels per step need 12544 bytes of shared
// memory; under a limit of 4096 the pass stages 4 per step (3136 bytes) and
// says why. A depthwise conv stages one channel's halo tile per block and
// fits as it is.

// REMARK: remark: group g0: window tile 1x128 x 64 channels (4x8 per thread), 16 input channels per step needs 12544 bytes of shared memory, over the limit of 4096; using 1x128 x 64 channels (4x8 per thread), 4 input channels per step (3136 bytes)
// CHECK-LABEL: func.func @pointwise_conv
// CHECK: fusion.group {{.*}}{name = "g0", kind = "window", schedule = #fusion.window<path = "pixels", th = 1, tw = 128, oc_t = 64, ci_step = 4, pt = 4, ot = 8>, schedule_text = "window: 1x1 conv as a GEMM over pixels, 128 pixels x 64 output channels per block (4x8 per thread), 4 input channels and their weights in shared memory per step (16 steps, the next step prefetched), epilogue in registers", shared_bytes_est = 3136, est_registers = {{[0-9]+}}}
func.func @pointwise_conv(%x: tensor<1x64x28x28xf32>, %w: tensor<64x64x1x1xf32>) -> tensor<1x64x28x28xf32> {
  %y = fusion.group (%x, %w) {name = "g0", kind = "window"} : (tensor<1x64x28x28xf32>, tensor<64x64x1x1xf32>) -> tensor<1x64x28x28xf32> {
  ^bb0(%xa: tensor<1x64x28x28xf32>, %wa: tensor<64x64x1x1xf32>):
    %c = nn.conv2d %xa, %wa : (tensor<1x64x28x28xf32>, tensor<64x64x1x1xf32>) -> tensor<1x64x28x28xf32>
    fusion.yield %c : tensor<1x64x28x28xf32>
  }
  func.return %y : tensor<1x64x28x28xf32>
}

// CHECK-LABEL: func.func @depthwise
// CHECK: fusion.group {{.*}}{name = "g1", kind = "window", schedule = #fusion.window<path = "depthwise", th = 16, tw = 28, oc_t = 1, ci_step = 1, pt = 4, ot = 1>, schedule_text = "window: depthwise conv, one channel per block, output tile 16x28 (4 rows per thread), its 18x30 halo tile in shared memory, weights in registers, epilogue in registers", shared_bytes_est = 2160, est_registers = {{[0-9]+}}}
func.func @depthwise(%x: tensor<1x64x28x28xf32>, %w: tensor<64x1x3x3xf32>) -> tensor<1x64x28x28xf32> {
  %y = fusion.group (%x, %w) {name = "g1", kind = "window"} : (tensor<1x64x28x28xf32>, tensor<64x1x3x3xf32>) -> tensor<1x64x28x28xf32> {
  ^bb0(%xa: tensor<1x64x28x28xf32>, %wa: tensor<64x1x3x3xf32>):
    %c = nn.conv2d %xa, %wa {pads = [1, 1, 1, 1], groups = 64} : (tensor<1x64x28x28xf32>, tensor<64x1x3x3xf32>) -> tensor<1x64x28x28xf32>
    fusion.yield %c : tensor<1x64x28x28xf32>
  }
  func.return %y : tensor<1x64x28x28xf32>
}
