// RUN: fusec %s --split-input-file -p 'decompose,fuse-attention{target="h200" gemm="library"},form-fusion-groups{target="h200" gemm="library"}' --remarks 2>&1 >/dev/null | filecheck %s
// RUN: fusec %s --split-input-file -p 'decompose,fuse-attention{target="h200" gemm="fused"},form-fusion-groups{target="h200" gemm="fused"}' --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=SIMT

// Groups the library GEMM (cuBLAS) will run are priced as it runs them.

// An f16 attention: the three-kernel path on tensor-core GEMMs beats the
// fused SIMT kernel (H200: 0.07 ms against 0.32 ms); with fusec's SIMT GEMMs
// the fused kernel wins.
// CHECK: missed: attention at nn.matmul (%o) not fused into one kernel: the fused kernel is estimated slower than the three-kernel path: fused {{.*}} us vs 3 kernels {{.*}} us
// CHECK: missed: nn.mul (%x) not fused into group {{g[0-9]+}}: the library GEMM would run these ops as a separate epilogue kernel: fusing them into its group saves nothing
// CHECK: remark: fused nn.mul (%x) into group
// SIMT: remark: fused attention nn.matmul (%s) .. nn.matmul (%o) into one kernel
func.func @attention(%q: tensor<8x12x512x64xf16>, %k: tensor<8x12x512x64xf16>, %v: tensor<8x12x512x64xf16>) -> tensor<8x12x512x64xf16> {
  %kt = nn.transpose %k {perm = [0, 1, 3, 2]} : (tensor<8x12x512x64xf16>) -> tensor<8x12x64x512xf16>
  %s = nn.matmul %q, %kt : (tensor<8x12x512x64xf16>, tensor<8x12x64x512xf16>) -> tensor<8x12x512x512xf16>
  %c = nn.constant dense<0.125> : tensor<f16>
  %x = nn.mul %s, %c : (tensor<8x12x512x512xf16>, tensor<f16>) -> tensor<8x12x512x512xf16>
  %p = nn.softmax %x {axis = -1} : tensor<8x12x512x512xf16>
  %o = nn.matmul %p, %v : (tensor<8x12x512x512xf16>, tensor<8x12x512x64xf16>) -> tensor<8x12x512x64xf16>
  func.return %o : tensor<8x12x512x64xf16>
}

// -----

// A head split folded into the matmul's operand loads would take the GEMM
// off cuBLAS: the views stay out (a copy kernel) when the library runs it.
// CHECK: missed: {{.*}}nn.matmul (%s){{.*}}estimated slower than its parts
// SIMT: remark: fused nn.matmul (%s) into group
func.func @heads(%qkv: tensor<4096x2304xf32>, %kt: tensor<12x64x4096xf32>) -> tensor<12x4096x4096xf32> {
  %q = nn.slice %qkv {starts = [0, 0], limits = [4096, 768]} : (tensor<4096x2304xf32>) -> tensor<4096x768xf32>
  %r = nn.reshape %q : (tensor<4096x768xf32>) -> tensor<4096x12x64xf32>
  %h = nn.transpose %r {perm = [1, 0, 2]} : (tensor<4096x12x64xf32>) -> tensor<12x4096x64xf32>
  %s = nn.matmul %h, %kt : (tensor<12x4096x64xf32>, tensor<12x64x4096xf32>) -> tensor<12x4096x4096xf32>
  func.return %s : tensor<12x4096x4096xf32>
}
