// RUN: fusec %s -p "decompose,fuse-attention" --remarks 2>&1 >/dev/null | filecheck %s
// RUN: fusec %s -p "decompose,fuse-attention" | filecheck %s --check-prefix=IR
// RUN: fusec %s -p "decompose,fuse-attention{engine=decode threads=64 splits=1}" | fusec - -p decompose | filecheck %s --check-prefix=FORCED
// RUN: fusec %s -p "decompose,fuse-attention{decode=false}" | filecheck %s --check-prefix=OFF

// A decode step: one query per (batch, head) over 2048 keys. The model
// may pick a decode tile: warps streaming the K/V
// rows, the keys split so that the grid fills the GPU.

// CHECK: remark: fused attention nn.matmul (%s) .. nn.matmul (%o) into a decode kernel ({{[0-9]+}} chunks of {{[0-9]+}} keys) plus a combine kernel, group attn0: {{.*}}; tile decode: 1 query per block, {{[248]}} warps each walking its keys 4 at a time ({{[0-9]+}} threads), keys split over {{[0-9]+}} blocks

// IR: schedule = #fusion.attention<block_q = 1, block_k = {{[0-9]+}}, threads = {{[0-9]+}}, rows = 1, cols = 4, stages = 1, engine = "decode", splits = {{[0-9]+}}>

// A forced decode tile (two warps, one block per head); the printed IR parses back.
// FORCED: schedule = #fusion.attention<block_q = 1, block_k = 8, threads = 64, rows = 1, cols = 4, stages = 1, engine = "decode">

// With decode=false the decode tiles are not offered.
// OFF-NOT: engine = "decode"

func.func @decode(%q: tensor<4x8x1x64xf32>, %k: tensor<4x8x2048x64xf32>, %v: tensor<4x8x2048x64xf32>) -> tensor<4x8x1x64xf32> {
  %kt = nn.transpose %k {perm = [0, 1, 3, 2]} : (tensor<4x8x2048x64xf32>) -> tensor<4x8x64x2048xf32>
  %s = nn.matmul %q, %kt : (tensor<4x8x1x64xf32>, tensor<4x8x64x2048xf32>) -> tensor<4x8x1x2048xf32>
  %c = nn.constant dense<0.125> : tensor<f32>
  %s2 = nn.mul %s, %c : (tensor<4x8x1x2048xf32>, tensor<f32>) -> tensor<4x8x1x2048xf32>
  %p = nn.softmax %s2 {axis = -1} : tensor<4x8x1x2048xf32>
  %o = nn.matmul %p, %v : (tensor<4x8x1x2048xf32>, tensor<4x8x2048x64xf32>) -> tensor<4x8x1x64xf32>
  func.return %o : tensor<4x8x1x64xf32>
}
