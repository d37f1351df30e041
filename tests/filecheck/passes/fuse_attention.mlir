// RUN: fusec %s --split-input-file -p decompose,fuse-attention --remarks 2>&1 >/dev/null | filecheck %s
// RUN: fusec %s --split-input-file -p decompose,fuse-attention,form-fusion-groups | filecheck %s --check-prefix=IR

// softmax(Q @ K^T * c + mask) @ V becomes one `attention` group with its
// tile; form-fusion-groups leaves it alone. Every refused attention is a
// `missed:` remark saying why.

// CHECK: remark: fused attention nn.matmul (%s) .. nn.matmul (%o) into one kernel, group attn0: the 2x16x16 scores stay on chip (saves 8 KiB and 2 launches; fused {{[0-9.]+}} us vs 3 kernels {{[0-9.]+}} us); tile {{.*}}
// IR-LABEL: func.func @masked
// IR: %{{.*}} = fusion.group (%k, %q, %mask, %v) {name = "attn0", kind = "attention", schedule = #fusion.attention<block_q = {{[0-9]+}}, block_k = {{[0-9]+}}, threads = {{[0-9]+}}, rows = {{[0-9]+}}, cols = {{[0-9]+}}, stages = {{[12]}}>}
// IR: nn.constant dense<{{.*}}> : tensor<f32>
// IR: nn.transpose
// IR: nn.reduce_max
// IR: nn.reduce_sum
// IR: nn.matmul
// IR-NEXT: fusion.yield
// IR-NOT: fusion.group
// IR: func.return
func.func @masked(%q: tensor<2x16x8xf32>, %k: tensor<2x16x8xf32>, %v: tensor<2x16x8xf32>, %mask: tensor<16x16xf32>) -> tensor<2x16x8xf32> {
  %kt = nn.transpose %k {perm = [0, 2, 1]} : (tensor<2x16x8xf32>) -> tensor<2x8x16xf32>
  %s = nn.matmul %q, %kt : (tensor<2x16x8xf32>, tensor<2x8x16xf32>) -> tensor<2x16x16xf32>
  %c = nn.constant dense<0.25> : tensor<f32>
  %x = nn.mul %s, %c : (tensor<2x16x16xf32>, tensor<f32>) -> tensor<2x16x16xf32>
  %y = nn.add %x, %mask : (tensor<2x16x16xf32>, tensor<16x16xf32>) -> tensor<2x16x16xf32>
  %p = nn.softmax %y {axis = -1} : tensor<2x16x16xf32>
  %o = nn.matmul %p, %v : (tensor<2x16x16xf32>, tensor<2x16x8xf32>) -> tensor<2x16x8xf32>
  func.return %o : tensor<2x16x8xf32>
}

// -----

// CHECK: missed: attention at nn.matmul (%o) not fused into one kernel: the scores nn.div (%p) are also read by func.return, so they would have to be written to memory
// IR-LABEL: func.func @scores_returned
// IR-NOT: kind = "attention"
func.func @scores_returned(%q: tensor<16x8xf32>, %kt: tensor<8x16xf32>, %v: tensor<16x8xf32>) -> (tensor<16x8xf32>, tensor<16x16xf32>) {
  %s = nn.matmul %q, %kt : (tensor<16x8xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  %p = nn.softmax %s {axis = -1} : tensor<16x16xf32>
  %o = nn.matmul %p, %v : (tensor<16x16xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  func.return %o, %p : tensor<16x8xf32>, tensor<16x16xf32>
}

// -----

// CHECK: missed: attention at nn.matmul (%o) not fused into one kernel: the softmax is not taken over the key axis (the last one)
func.func @query_axis(%q: tensor<16x8xf32>, %kt: tensor<8x16xf32>, %v: tensor<16x8xf32>) -> tensor<16x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<16x8xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  %p = nn.softmax %s {axis = 0} : tensor<16x16xf32>
  %o = nn.matmul %p, %v : (tensor<16x16xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  func.return %o : tensor<16x8xf32>
}

// -----

// CHECK: missed: attention at nn.matmul (%o) not fused into one kernel: the mask of nn.add (%y) broadcasts the 16x16 scores to 3x16x16; the mask must broadcast to the scores
func.func @mask_shape(%q: tensor<16x8xf32>, %kt: tensor<8x16xf32>, %v: tensor<16x8xf32>, %mask: tensor<3x16x16xf32>) -> tensor<3x16x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<16x8xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  %y = nn.add %s, %mask : (tensor<16x16xf32>, tensor<3x16x16xf32>) -> tensor<3x16x16xf32>
  %p = nn.softmax %y {axis = -1} : tensor<3x16x16xf32>
  %o = nn.matmul %p, %v : (tensor<3x16x16xf32>, tensor<16x8xf32>) -> tensor<3x16x8xf32>
  func.return %o : tensor<3x16x8xf32>
}

// -----

// CHECK: missed: attention at nn.matmul (%o) not fused into one kernel: attention is fused in f32, f16 or bf16 (f32 math) only; this one computes in f64
func.func @double(%q: tensor<16x8xf64>, %kt: tensor<8x16xf64>, %v: tensor<16x8xf64>) -> tensor<16x8xf64> {
  %s = nn.matmul %q, %kt : (tensor<16x8xf64>, tensor<8x16xf64>) -> tensor<16x16xf64>
  %p = nn.softmax %s {axis = -1} : tensor<16x16xf64>
  %o = nn.matmul %p, %v : (tensor<16x16xf64>, tensor<16x8xf64>) -> tensor<16x8xf64>
  func.return %o : tensor<16x8xf64>
}

// -----

// Past the dynamic shared memory of a block (227 KiB on the h200 profile).
// CHECK: missed: attention at nn.matmul (%o) not fused into one kernel: head dim 2048 (values 8) is too large: the smallest tile needs {{[0-9]+}} bytes of shared memory (limit 232448) and ~{{[0-9]+}} registers per thread (budget 128)
func.func @head_dim(%q: tensor<16x2048xf32>, %kt: tensor<2048x16xf32>, %v: tensor<16x8xf32>) -> tensor<16x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<16x2048xf32>, tensor<2048x16xf32>) -> tensor<16x16xf32>
  %p = nn.softmax %s {axis = -1} : tensor<16x16xf32>
  %o = nn.matmul %p, %v : (tensor<16x16xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  func.return %o : tensor<16x8xf32>
}

// -----

// CHECK: missed: attention at nn.matmul (%o) not fused into one kernel: nn.mul (%x) reads the scores more than once
func.func @squared(%q: tensor<16x8xf32>, %kt: tensor<8x16xf32>, %v: tensor<16x8xf32>) -> tensor<16x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<16x8xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  %x = nn.mul %s, %s : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %p = nn.softmax %x {axis = -1} : tensor<16x16xf32>
  %o = nn.matmul %p, %v : (tensor<16x16xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  func.return %o : tensor<16x8xf32>
}

// -----

// One head, 32 queries, 16384 keys: the fused kernel has one block, the
// three-kernel path fills the GPU, so the gain check refuses (split-KV
// tiles are offered only with split-kv: fuse_attention_split.mlir).
// CHECK: missed: attention at nn.matmul (%o) not fused into one kernel: the fused kernel is estimated slower than the three-kernel path: fused {{[0-9.]+}} us vs 3 kernels {{[0-9.]+}} us (tile {{.*}})
// IR-LABEL: func.func @long_keys_one_block
// IR-NOT: kind = "attention"
func.func @long_keys_one_block(%q: tensor<32x64xf32>, %kt: tensor<64x16384xf32>, %v: tensor<16384x64xf32>) -> tensor<32x64xf32> {
  %s = nn.matmul %q, %kt : (tensor<32x64xf32>, tensor<64x16384xf32>) -> tensor<32x16384xf32>
  %p = nn.softmax %s {axis = -1} : tensor<32x16384xf32>
  %o = nn.matmul %p, %v : (tensor<32x16384xf32>, tensor<16384x64xf32>) -> tensor<32x64xf32>
  func.return %o : tensor<32x64xf32>
}
