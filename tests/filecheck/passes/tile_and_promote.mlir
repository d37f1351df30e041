// RUN: fusec %s -p 'tile-and-promote{shared_memory_limit=9000 gemm=fused}' | filecheck %s
// RUN: fusec %s -p 'tile-and-promote{shared_memory_limit=9000 gemm=fused}' --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK

// The 128x128 GEMM tile needs 16896 bytes of shared memory; under a limit of
// 9000 the pass records the 64x64 tile (8704 bytes), which the emitter builds,
// and says why. Both GEMM estimates are a remark.

// REMARK: remark: group g0: library GEMM + epilogue 85.3 us vs fused SIMT 159.9 us: fused (--gemm fused)
// REMARK-NEXT: remark: group g0: tile 128x128x8 (8x8 per thread) needs 16896 bytes of shared memory, over the limit of 9000; using 64x64x8 (4x4 per thread) (8704 bytes)
// CHECK-LABEL: func.func @mm
// CHECK: fusion.group {{.*}}{name = "g0", kind = "contraction", schedule = #fusion.contraction<impl = "simt", bm = 64, bn = 64, bk = 8, tm = 4, tn = 4, vec = 2, stages = 2>, schedule_text = "gemm: block tile 64x64x8 (4x4 per thread), A and B tiles in shared memory (double-buffered), epilogue in registers", shared_bytes_est = 8704, est_registers = 52}
func.func @mm(%x: tensor<2048x512xf32>, %w: tensor<512x2048xf32>) -> tensor<2048x2048xf32> {
  %y = fusion.group (%x, %w) {name = "g0", kind = "contraction"} : (tensor<2048x512xf32>, tensor<512x2048xf32>) -> tensor<2048x2048xf32> {
  ^bb0(%xa: tensor<2048x512xf32>, %wa: tensor<512x2048xf32>):
    %m = nn.matmul %xa, %wa : (tensor<2048x512xf32>, tensor<512x2048xf32>) -> tensor<2048x2048xf32>
    fusion.yield %m : tensor<2048x2048xf32>
  }
  func.return %y : tensor<2048x2048xf32>
}
