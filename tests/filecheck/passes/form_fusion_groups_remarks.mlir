// RUN: fusec %s --split-input-file -p decompose,form-fusion-groups --remarks 2>&1 >/dev/null | filecheck %s
// RUN: fusec %s --split-input-file -p 'decompose,form-fusion-groups{max_registers=16}' --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=RES
// RUN: fusec %s --split-input-file -p 'decompose,form-fusion-groups{allow_reduced_precision=true}' --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=PREC

// One case per refusal reason: every refused fusion is a `missed:` remark
// with a sentence saying why; accepted ones are `remark: fused ...` lines with
// the bytes and launches saved and the cost model's dT.

// CHECK: remark: fused nn.relu (%r) into group g0: saves 16 KiB and 1 launch (dT = {{.*}} us (T_mem {{.*}} - T_overlap {{.*}} - T_spill {{.*}}))
// RES: missed: nn.relu (%r) not fused with nn.exp (%e): the fused kernel needs about 17 registers per thread, over the limit of 16 on h200
func.func @accepted(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %e = nn.exp %x : tensor<64x32xf32>
  %r = nn.relu %e : tensor<64x32xf32>
  func.return %r : tensor<64x32xf32>
}

// -----

// CHECK: missed: nn.matmul (%m) not fused into group g0: a reduction group and a contraction group cannot share one kernel (no schedule computes both)
func.func @kinds(%x: tensor<64x32xf32>, %w: tensor<32x16xf32>) -> tensor<64x16xf32> {
  %y = nn.softmax %x : tensor<64x32xf32>
  %m = nn.matmul %y, %w : (tensor<64x32xf32>, tensor<32x16xf32>) -> tensor<64x16xf32>
  func.return %m : tensor<64x16xf32>
}

// -----

// CHECK: missed: nn.add (%y) not fused with nn.exp (%e): merging would create a cycle through nn.matmul (%m), which reads one group and feeds the other
func.func @cycle(%x: tensor<32x32xf32>, %w: tensor<32x32xf32>) -> tensor<32x32xf32> {
  %e = nn.exp %x : tensor<32x32xf32>
  %m = nn.matmul %e, %w : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
  %y = nn.add %e, %m : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
  func.return %y : tensor<32x32xf32>
}

// -----

// CHECK: missed: nn.reduce_sum (%rows) not fused with nn.reduce_sum (%all): the reductions cannot share one iteration space: nn.reduce_sum (%rows) reduces axes [2] of 4x8x16 but nn.reduce_sum (%all) reduces axes [1, 2] of 4x8x16
func.func @iteration_space(%x: tensor<4x8x16xf32>) -> (tensor<4x1x1xf32>, tensor<4x8x1xf32>) {
  %all = nn.reduce_sum %x {axes = [1, 2], keepdims = true} : (tensor<4x8x16xf32>) -> tensor<4x1x1xf32>
  %rows = nn.reduce_sum %x {axes = [2], keepdims = true} : (tensor<4x8x16xf32>) -> tensor<4x8x1xf32>
  func.return %all, %rows : tensor<4x1x1xf32>, tensor<4x8x1xf32>
}

// -----

// CHECK: missed: nn.relu (%r) not fused with nn.matmul (%m): nn.relu (%r) would be a prologue of a contraction group; a contraction loads its operands directly and fuses only an elementwise epilogue
func.func @prologue(%x: tensor<64x32xf32>, %w: tensor<32x16xf32>) -> tensor<64x16xf32> {
  %r = nn.relu %x : tensor<64x32xf32>
  %m = nn.matmul %r, %w : (tensor<64x32xf32>, tensor<32x16xf32>) -> tensor<64x16xf32>
  func.return %m : tensor<64x16xf32>
}

// -----

// CHECK: missed: nn.add (%y) not fused with nn.mul (%b2): nn.mul (%b2) is also read by func.return outside the group, and a pointwise group's results must have shape 64x32, not 32
func.func @result_shapes(%x: tensor<64x32xf32>, %b: tensor<32xf32>) -> (tensor<64x32xf32>, tensor<32xf32>) {
  %b2 = nn.mul %b, %b : (tensor<32xf32>, tensor<32xf32>) -> tensor<32xf32>
  %y = nn.add %x, %b2 : (tensor<64x32xf32>, tensor<32xf32>) -> tensor<64x32xf32>
  func.return %y, %b2 : tensor<64x32xf32>, tensor<32xf32>
}

// -----

// CHECK: missed: nn.relu (%r) not fused with nn.exp (%e): nn.exp (%e) has fusion = "never"
func.func @never(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %e = nn.exp %x {fusion = "never"} : tensor<64x32xf32>
  %r = nn.relu %e : tensor<64x32xf32>
  func.return %r : tensor<64x32xf32>
}

// -----

// CHECK: missed: nn.cast (%h) not fused with nn.reduce_sum (%s): nn.cast (%h) rounds to f16 and feeds the accumulation of nn.reduce_sum (%s); fused, the sum would see unrounded values (set allow_reduced_precision to fuse anyway)
// PREC: remark: fused nn.cast (%h) into group g0
func.func @precision(%x: tensor<64x32xf32>) -> tensor<64x1xf16> {
  %h = nn.cast %x : (tensor<64x32xf32>) -> tensor<64x32xf16>
  %s = nn.reduce_sum %h {axes = [1], keepdims = true} : (tensor<64x32xf16>) -> tensor<64x1xf16>
  func.return %s : tensor<64x1xf16>
}

// -----

// CHECK: missed: nn.add (%y) not fused with nn.gelu (%gb): the cost model predicts no gain: dT = -{{.*}} us (T_mem {{.*}} - T_overlap {{.*}} - T_spill 0.0)
func.func @gain(%x: tensor<65536x4096xf32>, %b: tensor<4096xf32>) -> tensor<65536x4096xf32> {
  %gb = nn.gelu %b : tensor<4096xf32>
  %y = nn.add %x, %gb : (tensor<65536x4096xf32>, tensor<4096xf32>) -> tensor<65536x4096xf32>
  func.return %y : tensor<65536x4096xf32>
}

// -----

// CHECK: missed: nn.add (%y) not fused with nn.reduce_sum (%s): nn.reduce_sum (%s) drops its reduced axes (keepdims = false), so its readers do not broadcast back over the rows
func.func @keepdims(%x: tensor<64x32xf32>, %c: tensor<64xf32>) -> tensor<64xf32> {
  %s = nn.reduce_sum %x {axes = [1]} : (tensor<64x32xf32>) -> tensor<64xf32>
  %y = nn.add %s, %c : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}

// -----

// CHECK: missed: nn.transpose (%kt) not fused with nn.matmul (%s): nn.transpose (%kt) is also read by func.return outside the group; a folded view must feed only the matmul's operand load
func.func @shared_view(%q: tensor<16x8xf32>, %k: tensor<16x8xf32>) -> (tensor<16x16xf32>, tensor<8x16xf32>) {
  %kt = nn.transpose %k {perm = [1, 0]} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %s = nn.matmul %q, %kt : (tensor<16x8xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  func.return %s, %kt : tensor<16x16xf32>, tensor<8x16xf32>
}

// -----

// A slice of a value read from memory folds into the pointwise group's loads
// (its refusals: pointwise_view_refusals.mlir).
// CHECK: remark: fused nn.exp (%e) into group g0: saves 512 B and 1 launch
func.func @layout(%x: tensor<16x8xf32>) -> tensor<8x8xf32> {
  %t = nn.slice %x {starts = [0, 0], limits = [8, 8]} : (tensor<16x8xf32>) -> tensor<8x8xf32>
  %e = nn.exp %t : tensor<8x8xf32>
  func.return %e : tensor<8x8xf32>
}

// -----

// Two transposes moving the innermost axis to different axes need two tiles.
// CHECK: its transposes move the innermost axis to axes 0 and 1 (perm [2, 1, 0] and perm [1, 2, 0]); one tile serves one pair of axes
func.func @two_tile_axes(%a: tensor<4x3x2xf32>, %b: tensor<4x2x3xf32>) -> tensor<2x3x4xf32> {
  %ta = nn.transpose %a {perm = [2, 1, 0]} : (tensor<4x3x2xf32>) -> tensor<2x3x4xf32>
  %tb = nn.transpose %b {perm = [1, 2, 0]} : (tensor<4x2x3xf32>) -> tensor<2x3x4xf32>
  %s = nn.add %ta, %tb : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  func.return %s : tensor<2x3x4xf32>
}

// -----

// A transposed value broadcast to a larger iteration space stays a copy.
// CHECK: the transposed value 3x4 is broadcast to 2x3x4; a pointwise kernel reads a transposed operand only at the iteration shape
func.func @broadcast_transpose(%a: tensor<4x3xf32>, %y: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %t = nn.transpose %a {perm = [1, 0]} : (tensor<4x3xf32>) -> tensor<3x4xf32>
  %s = nn.add %t, %y : (tensor<3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  func.return %s : tensor<2x3x4xf32>
}

// -----

// CHECK: missed: nn.matmul (%b) not fused with nn.matmul (%a): both hold a contraction op (nn.matmul (%a) and nn.matmul (%b)); one kernel computes one
func.func @two_matmuls(%x: tensor<16x16xf32>, %w: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %a = nn.matmul %x, %w : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %b = nn.matmul %a, %w : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  func.return %b : tensor<16x16xf32>
}

// -----

// CHECK: remark: recomputed nn.exp (%e) in group g1 instead of writing it: saves 2 KiB (dT = {{.*}})
func.func @recompute(%x: tensor<4x8x16xf32>) -> (tensor<4x8x16xf32>, tensor<4x8x16xf32>) {
  %e = nn.exp %x : tensor<4x8x16xf32>
  %r1 = nn.reduce_sum %e {axes = [2], keepdims = true} : (tensor<4x8x16xf32>) -> tensor<4x8x1xf32>
  %y1 = nn.div %e, %r1 : (tensor<4x8x16xf32>, tensor<4x8x1xf32>) -> tensor<4x8x16xf32>
  %r2 = nn.reduce_max %e {axes = [1, 2], keepdims = true} : (tensor<4x8x16xf32>) -> tensor<4x1x1xf32>
  %y2 = nn.sub %e, %r2 : (tensor<4x8x16xf32>, tensor<4x1x1xf32>) -> tensor<4x8x16xf32>
  func.return %y1, %y2 : tensor<4x8x16xf32>, tensor<4x8x16xf32>
}

// -----

// Recomputing %p would save writing and reading it, but the second group
// would have to read both %a and %b instead: no gain.
// CHECK: missed: nn.add (%p) not recomputed in group g1: recomputing costs more than it saves: dT = -{{.*}}
func.func @no_recompute(%a: tensor<4x8x16xf32>, %b: tensor<4x8x16xf32>) -> (tensor<4x8x16xf32>, tensor<4x8x16xf32>) {
  %p = nn.add %a, %b : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %r1 = nn.reduce_sum %p {axes = [2], keepdims = true} : (tensor<4x8x16xf32>) -> tensor<4x8x1xf32>
  %y1 = nn.div %p, %r1 : (tensor<4x8x16xf32>, tensor<4x8x1xf32>) -> tensor<4x8x16xf32>
  %r2 = nn.reduce_max %p {axes = [1, 2], keepdims = true} : (tensor<4x8x16xf32>) -> tensor<4x1x1xf32>
  %y2 = nn.sub %p, %r2 : (tensor<4x8x16xf32>, tensor<4x1x1xf32>) -> tensor<4x8x16xf32>
  func.return %y1, %y2 : tensor<4x8x16xf32>, tensor<4x8x16xf32>
}

// -----

// A group holding a transposed operand stays pointwise: a reduction kernel
// would read the transposed %x coalesced only in the column layout and %y
// only in the row layout (it has no tile).
// CHECK: missed: nn.reduce_sum (%s) not fused into group g0: a reduction kernel would read an operand through nn.transpose (%t), but the view is contiguous along another axis than the row-shaped values the kernel reads or writes, so neither reduction layout coalesces both
func.func @transpose_then_sum(%x: tensor<8x16xf32>, %y: tensor<16x8xf32>) -> tensor<16x1xf32> {
  %t = nn.transpose %x {perm = [1, 0]} : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %a = nn.add %t, %y : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %s = nn.reduce_sum %a {axes = [1], keepdims = true} : (tensor<16x8xf32>) -> tensor<16x1xf32>
  func.return %s : tensor<16x1xf32>
}

// -----

// A conv + pool kernel (a direct loop over channels and taps) priced on its
// own path against the tiled conv and the lone pool: refused, both times given.
// CHECK: missed: nn.max_pool2d (%p) not fused into group g0: the fused kernel is estimated slower than its parts: fused (conv_pool) {{[0-9.]+}} us vs parts {{[0-9.]+}} us (window_tiled) + {{[0-9.]+}} us (window_tiled)
func.func @slower_fused(%x: tensor<32x64x56x56xf32>, %w: tensor<64x64x3x3xf32>) -> tensor<32x64x28x28xf32> {
  %c = nn.conv2d %x, %w {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1} : (tensor<32x64x56x56xf32>, tensor<64x64x3x3xf32>) -> tensor<32x64x56x56xf32>
  %r = nn.relu %c : tensor<32x64x56x56xf32>
  %p = nn.max_pool2d %r {kernel = [2, 2], strides = [2, 2], pads = [0, 0, 0, 0]} : (tensor<32x64x56x56xf32>) -> tensor<32x64x28x28xf32>
  func.return %p : tensor<32x64x28x28xf32>
}
