// RUN: fusec %s --split-input-file -p decompose,form-fusion-groups,check-precision --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec %s --split-input-file -p decompose,form-fusion-groups,check-precision | filecheck %s

// check-precision runs each fused group on random data twice: unfused (every
// value rounded to its element type, as stored between kernels) and fused
// (intermediates kept in f32). A group over its dtype's tolerance is split.

// f16 cancellation: stored, x + 1024 loses x's fraction (f16 spacing there is
// 1); in a fused kernel's f32 register it keeps it. prec_ok's estimate (one
// skipped rounding, 2^-11) lets the fusion through; the measurement refuses it.
// REMARK: remark: fused nn.sub (%s) into group g0
// REMARK: missed: group g0 refused: fused result differs from the unfused one by {{[0-9.]+}}e-1 (tolerance 1e-2 for f16); split into one kernel per op
// CHECK-LABEL: func.func @cancel
// CHECK-NOT: fusion.group
// CHECK: %[[C:.*]] = nn.constant
// CHECK: %[[A:.*]] = nn.add %x, %[[C]]
// CHECK: %[[S:.*]] = nn.sub %[[A]], %[[C]]
// CHECK: func.return %[[S]]
func.func @cancel(%x: tensor<64x32xf16>) -> tensor<64x32xf16> {
  %c = nn.constant dense<1024.0> : tensor<f16>
  %a = nn.add %x, %c : (tensor<64x32xf16>, tensor<f16>) -> tensor<64x32xf16>
  %s = nn.sub %a, %c : (tensor<64x32xf16>, tensor<f16>) -> tensor<64x32xf16>
  func.return %s : tensor<64x32xf16>
}

// -----

// One skipped rounding of a well-conditioned f16 chain: within tolerance.
// REMARK: remark: fused nn.mul (%m) into group g0
// REMARK: remark: group g0 kept: fused result differs from the unfused one by {{[0-9.]+}}e-4 (tolerance 1e-2 for f16)
// CHECK-LABEL: func.func @kept
// CHECK: %[[M:.*]] = fusion.group (%x, %y) {name = "g0", kind = "pointwise"}
// CHECK: nn.exp
// CHECK: nn.mul
// CHECK: func.return %[[M]]
func.func @kept(%x: tensor<64x32xf16>, %y: tensor<64x32xf16>) -> tensor<64x32xf16> {
  %e = nn.exp %x : tensor<64x32xf16>
  %m = nn.mul %e, %y : (tensor<64x32xf16>, tensor<64x32xf16>) -> tensor<64x32xf16>
  func.return %m : tensor<64x32xf16>
}

// -----

// f32 groups cannot differ (f32 is the compute type): not run, no remark.
// REMARK-NOT: group g0 kept
// CHECK-LABEL: func.func @f32
// CHECK: fusion.group
func.func @f32(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %e = nn.exp %x : tensor<64x32xf32>
  %r = nn.relu %e : tensor<64x32xf32>
  func.return %r : tensor<64x32xf32>
}
