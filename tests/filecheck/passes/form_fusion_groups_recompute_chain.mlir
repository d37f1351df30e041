// RUN: fusec %s --split-input-file -p 'decompose,form-fusion-groups{remarks=false}' | filecheck %s
// RUN: fusec %s --split-input-file -p decompose,form-fusion-groups --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec %s --split-input-file -p 'decompose,form-fusion-groups{max_recompute_flops=1}' --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=BOUND

// Step 3 of form-fusion-groups recomputes a chain of elementwise ops in the
// group reading its last value, from the chain's leaves, instead of writing
// and re-reading that value.

// Layer-norm backward: the column sums (g0) compute xhat = (x - mean) * rstd
// for dgamma; the row means (g1) recompute both ops from x, mean and rstd
// instead of reading xhat, which g0 no longer writes.
// CHECK-LABEL: func.func @ln_bwd
// CHECK:      %dg, %db = fusion.group (%x, %mean, %rstd, %dy) {name = "g0", kind = "reduction"}
// CHECK:        %xc = nn.sub
// CHECK:        %xh = nn.mul
// CHECK:        fusion.yield %dg_1, %db_1
// CHECK:      %dx = fusion.group (%x, %mean, %rstd, %dy, %gamma) {name = "g1", kind = "reduction"}
// CHECK-NEXT: ^bb0(%x_1: tensor<8x16xf32>, %mean_1: tensor<8x1xf32>, %rstd_1: tensor<8x1xf32>, %dy_1: tensor<8x16xf32>, %gamma_1: tensor<16xf32>):
// CHECK-NEXT:   %xc = nn.sub %x_1, %mean_1
// CHECK-NEXT:   %xh = nn.mul %xc, %rstd_1
// CHECK-NEXT:   %dxh = nn.mul %dy_1, %gamma_1
// CHECK:        %dxhxh = nn.mul %dxh, %xh
// CHECK:        %b = nn.mul %xh, %m2
// REMARK: remark: recomputed nn.sub (%xc), nn.mul (%xh) in group g1 instead of writing it: saves 480 B (dT = {{.*}})
// BOUND: missed: nn.mul (%xh) not recomputed in group g1: the chain nn.sub (%xc), nn.mul (%xh) costs 2 flops per element, over max_recompute_flops = 1
func.func @ln_bwd(%x: tensor<8x16xf32>, %dy: tensor<8x16xf32>, %gamma: tensor<16xf32>, %mean: tensor<8x1xf32>, %rstd: tensor<8x1xf32>) -> (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %xc = nn.sub %x, %mean : (tensor<8x16xf32>, tensor<8x1xf32>) -> tensor<8x16xf32>
  %xh = nn.mul %xc, %rstd : (tensor<8x16xf32>, tensor<8x1xf32>) -> tensor<8x16xf32>
  %dyxh = nn.mul %dy, %xh : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %dg = nn.reduce_sum %dyxh {axes = [0]} : (tensor<8x16xf32>) -> tensor<16xf32>
  %db = nn.reduce_sum %dy {axes = [0]} : (tensor<8x16xf32>) -> tensor<16xf32>
  %dxh = nn.mul %dy, %gamma : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %m1 = nn.reduce_mean %dxh {axes = [1], keepdims = true} : (tensor<8x16xf32>) -> tensor<8x1xf32>
  %dxhxh = nn.mul %dxh, %xh : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %m2 = nn.reduce_mean %dxhxh {axes = [1], keepdims = true} : (tensor<8x16xf32>) -> tensor<8x1xf32>
  %a = nn.sub %dxh, %m1 : (tensor<8x16xf32>, tensor<8x1xf32>) -> tensor<8x16xf32>
  %b = nn.mul %xh, %m2 : (tensor<8x16xf32>, tensor<8x1xf32>) -> tensor<8x16xf32>
  %c = nn.sub %a, %b : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %dx = nn.mul %c, %rstd : (tensor<8x16xf32>, tensor<8x1xf32>) -> tensor<8x16xf32>
  func.return %dx, %dg, %db : tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// A leaf the chain's group computes as a per-row value (the row mean)
// becomes one more result of that group: g0 writes %mean (8x1), not %xc.
// CHECK-LABEL: func.func @row_statistic_leaf
// CHECK:      %mean, %r = fusion.group (%x) {name = "g0", kind = "reduction"}
// CHECK:        fusion.yield %mean_1, %r_1
// CHECK:      %k, %xs = fusion.group (%x, %mean) {name = "g1", kind = "reduction"}
// CHECK-NEXT: ^bb0(%x_1: tensor<8x16xf32>, %mean_1: tensor<8x1xf32>):
// CHECK-NEXT:   %xc = nn.sub %x_1, %mean_1
// CHECK-NEXT:   %e = nn.exp %xc
// CHECK-NEXT:   %k_1 = nn.reduce_sum %e {axes = [0]}
// REMARK: remark: recomputed nn.sub (%xc), nn.exp (%e) in group g1 instead of writing it: saves 960 B (dT = {{.*}})
// BOUND: missed: nn.exp (%e) not recomputed in group g1: the chain nn.sub (%xc), nn.exp (%e) costs 5 flops per element, over max_recompute_flops = 1
func.func @row_statistic_leaf(%x: tensor<8x16xf32>) -> (tensor<8x1xf32>, tensor<16xf32>, tensor<16xf32>) {
  %mean = nn.reduce_mean %x {axes = [1], keepdims = true} : (tensor<8x16xf32>) -> tensor<8x1xf32>
  %xc = nn.sub %x, %mean : (tensor<8x16xf32>, tensor<8x1xf32>) -> tensor<8x16xf32>
  %e = nn.exp %xc : tensor<8x16xf32>
  %r = nn.reduce_sum %e {axes = [1], keepdims = true} : (tensor<8x16xf32>) -> tensor<8x1xf32>
  %k = nn.reduce_sum %e {axes = [0]} : (tensor<8x16xf32>) -> tensor<16xf32>
  %xs = nn.reduce_sum %x {axes = [0]} : (tensor<8x16xf32>) -> tensor<16xf32>
  func.return %r, %k, %xs : tensor<8x1xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// A chain holding a narrowing cast is not recomputed in a group that
// accumulates: the clone would feed the sum unrounded values (prec_ok's rule).
// REMARK: missed: nn.sub (%c), nn.cast (%h), nn.mul (%y) not recomputed in group g1: nn.cast (%h) rounds to f16 and the group of nn.reduce_sum (%k) (2 ops) accumulates; recomputed there, the sum would see unrounded values (set allow_reduced_precision to recompute anyway)
func.func @narrowing_cast(%x: tensor<16x12xf32>, %m: tensor<16x1xf32>) -> (tensor<16x1xf16>, tensor<12xf16>, tensor<12xf32>) {
  %c = nn.sub %x, %m : (tensor<16x12xf32>, tensor<16x1xf32>) -> tensor<16x12xf32>
  %h = nn.cast %c : (tensor<16x12xf32>) -> tensor<16x12xf16>
  %y = nn.mul %h, %h : (tensor<16x12xf16>, tensor<16x12xf16>) -> tensor<16x12xf16>
  %r = nn.reduce_sum %y {axes = [1], keepdims = true} : (tensor<16x12xf16>) -> tensor<16x1xf16>
  %k = nn.reduce_sum %y {axes = [0]} : (tensor<16x12xf16>) -> tensor<12xf16>
  %xs = nn.reduce_sum %x {axes = [0]} : (tensor<16x12xf32>) -> tensor<12xf32>
  func.return %r, %k, %xs : tensor<16x1xf16>, tensor<12xf16>, tensor<12xf32>
}
