// RUN: fusec %s --split-input-file -p 'decompose,form-fusion-groups{target=h200},group-each-op,tile-and-promote{target=h200}' | filecheck %s
// RUN: fusec %s --split-input-file -p 'decompose,form-fusion-groups{target=h200},group-each-op,tile-and-promote{target=h200},lower-to-numba' | filecheck %s --check-prefix=LOWER

// Reductions with several passes over a non-trailing axis are one group in
// the column layout. A softmax whose column does not fit shared memory
// folds its max and sum of exps into one pass (online = 1): the column is
// read twice. Columns too few to fill the GPU split over blocks (splits =
// 16 of 512 rows) in two kernels: the partial statistics of each chunk,
// then their combination and the chunk's outputs. NCHW channel statistics
// keep 128 channels only: the fused kernel could not fill the GPU, so the
// mean and the variance are two split kernels (each reads the input once).

// CHECK-LABEL: func.func @column_softmax
// CHECK: fusion.group (%x) {name = "g0", kind = "reduction", schedule = #fusion.reduction<layout = "column", row = "memory", lanes = 8, rows_per_block = 32, splits = 16, chunk = 512, per_lane = 0, cached = 0, unroll = 4, online = 1>, schedule_text = "reduction: column schedule, 32 columns x 8 lanes per block, partials transposed in shared memory, each column split over 16 blocks in two kernels (partial statistics, then their combination and the outputs), softmax max and sum of exps in one pass (online)"
// CHECK-NOT: fusion.group
// LOWER-LABEL: func.func @column_softmax
// LOWER: kernel = "column_softmax_g0_reduce_max", grid = [256, 16, 1], block = [32, 8, 1]
func.func @column_softmax(%x: tensor<8192x8192xf32>) -> tensor<8192x8192xf32> {
  %0 = nn.softmax %x {axis = 0} : tensor<8192x8192xf32>
  func.return %0 : tensor<8192x8192xf32>
}

// -----

// A column that fits the shared-memory cache is read once; no online pass.
// CHECK-LABEL: func.func @middle_axis
// CHECK: fusion.group (%x) {name = "g0", kind = "reduction", schedule = #fusion.reduction<layout = "column", row = "shared", {{.*}}, online = 0>
// CHECK-NOT: fusion.group
func.func @middle_axis(%x: tensor<16x64x256xf32>) -> tensor<16x64x256xf32> {
  %0 = nn.log_softmax %x {axis = 1} : tensor<16x64x256xf32>
  func.return %0 : tensor<16x64x256xf32>
}

// -----

// CHECK-LABEL: func.func @channel_stats
// CHECK: fusion.group (%x) {name = "g1", kind = "reduction", schedule = #fusion.reduction<layout = "row", row = "shared", lanes = 256, rows_per_block = 1, splits = 8,
// CHECK: fusion.group (%x, %m) {name = "g0", kind = "reduction", schedule = #fusion.reduction<layout = "row", row = "shared", lanes = 256, rows_per_block = 1, splits = 8,
// CHECK-NOT: fusion.group
func.func @channel_stats(%x: tensor<64x128x56x56xf32>) -> (tensor<1x128x1x1xf32>, tensor<1x128x1x1xf32>) {
  %m = nn.reduce_mean %x {axes = [0, 2, 3], keepdims = true} : (tensor<64x128x56x56xf32>) -> tensor<1x128x1x1xf32>
  %d = nn.sub %x, %m : (tensor<64x128x56x56xf32>, tensor<1x128x1x1xf32>) -> tensor<64x128x56x56xf32>
  %sq = nn.mul %d, %d : (tensor<64x128x56x56xf32>, tensor<64x128x56x56xf32>) -> tensor<64x128x56x56xf32>
  %v = nn.reduce_mean %sq {axes = [0, 2, 3], keepdims = true} : (tensor<64x128x56x56xf32>) -> tensor<1x128x1x1xf32>
  func.return %m, %v : tensor<1x128x1x1xf32>, tensor<1x128x1x1xf32>
}
