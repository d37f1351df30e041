// RUN: fusec %s -p "decompose,fuse-attention,register-budget{ptxas=false}" --remarks 2>&1 >/dev/null | filecheck %s
// RUN: fusec %s -p decompose,fuse-attention | filecheck %s --check-prefix=IR
// RUN: fusec %s -p "decompose,fuse-attention{block_q=32 block_k=16 engine=mma}" | filecheck %s --check-prefix=FIXED

// At B8 H12 S512 D64 on the H200 the model prices the tensor-core engine
// fastest (measured there: 0.258 ms in one launch, torch.compile 0.263): the
// schedule records `engine = "mma"`, and register-budget keeps its tile over
// the budget, priced at the occupancy it leaves. A fixed mma tile is taken
// as given.

// CHECK: remark: fused attention nn.matmul (%s) .. nn.matmul (%o) into one kernel, group attn0: {{.*}} tile {{[0-9]+}} queries x {{[0-9]+}} keys per block on tensor cores, 16 queries per warp ({{[0-9]+}} threads), 1 stage
// CHECK: remark: kept group attn0 at ~{{[0-9]+}} registers (base 80, scores {{[0-9]+}}, accumulators 32{{.*}}), over the budget of 128: its schedule was priced at the occupancy that leaves
// IR: kind = "attention", schedule = #fusion.attention<block_q = {{[0-9]+}}, block_k = {{[0-9]+}}, threads = {{[0-9]+}}, rows = 16, cols = {{[0-9]+}}, stages = 1, engine = "mma">
// FIXED: schedule = #fusion.attention<block_q = 32, block_k = 16, threads = 64, rows = 16, cols = 16, stages = 1, engine = "mma">
func.func @attention(%q: tensor<8x12x512x64xf32>, %k: tensor<8x12x512x64xf32>, %v: tensor<8x12x512x64xf32>, %mask: tensor<512x512xf32>) -> tensor<8x12x512x64xf32> {
  %kt = nn.transpose %k {perm = [0, 1, 3, 2]} : (tensor<8x12x512x64xf32>) -> tensor<8x12x64x512xf32>
  %s = nn.matmul %q, %kt : (tensor<8x12x512x64xf32>, tensor<8x12x64x512xf32>) -> tensor<8x12x512x512xf32>
  %c = nn.constant dense<0.125> : tensor<f32>
  %x = nn.mul %s, %c : (tensor<8x12x512x512xf32>, tensor<f32>) -> tensor<8x12x512x512xf32>
  %y = nn.add %x, %mask : (tensor<8x12x512x512xf32>, tensor<512x512xf32>) -> tensor<8x12x512x512xf32>
  %p = nn.softmax %y {axis = -1} : tensor<8x12x512x512xf32>
  %o = nn.matmul %p, %v : (tensor<8x12x512x512xf32>, tensor<8x12x512x64xf32>) -> tensor<8x12x512x64xf32>
  func.return %o : tensor<8x12x512x64xf32>
}
