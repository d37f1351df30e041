// RUN: fusec %s --split-input-file -p 'decompose,form-fusion-groups{remarks=false}' | filecheck %s

// One case per fusion pattern of `form-fusion-groups`; CHECK-NOT lines prove
// that the ops really merged (nothing of theirs is left outside the group).

// A chain of elementwise ops (with a broadcast bias) is one pointwise kernel.
// CHECK-LABEL: func.func @vertical_chain
// CHECK-SAME: (%[[X:.*]]: tensor<64x32xf32>, %[[B:.*]]: tensor<32xf32>)
// CHECK: %[[G:.*]] = fusion.group (%[[X]], %[[B]]) {name = "g0", kind = "pointwise"}
// CHECK: ^bb0(%[[XA:.*]]: tensor<64x32xf32>, %[[BA:.*]]: tensor<32xf32>):
// CHECK-NEXT: %[[A:.*]] = nn.add %[[XA]], %[[BA]]
// CHECK-NEXT: %[[R:.*]] = nn.relu %[[A]]
// CHECK-NEXT: %[[T:.*]] = nn.tanh %[[R]]
// CHECK-NEXT: fusion.yield %[[T]] : tensor<64x32xf32>
// CHECK-NOT: nn.
// CHECK: func.return %[[G]]
func.func @vertical_chain(%x: tensor<64x32xf32>, %b: tensor<32xf32>) -> tensor<64x32xf32> {
  %a = nn.add %x, %b : (tensor<64x32xf32>, tensor<32xf32>) -> tensor<64x32xf32>
  %r = nn.relu %a : tensor<64x32xf32>
  %t = nn.tanh %r : tensor<64x32xf32>
  func.return %t : tensor<64x32xf32>
}

// -----

// Two siblings reading %x become one multi-output group: %x is read once.
// CHECK-LABEL: func.func @horizontal_siblings
// CHECK: %[[E:.*]], %[[N:.*]] = fusion.group (%[[X:.*]]) {name = "g0", kind = "pointwise"}
// CHECK: %[[EI:.*]] = nn.exp
// CHECK-NEXT: %[[NI:.*]] = nn.neg
// CHECK-NEXT: fusion.yield %[[EI]], %[[NI]]
// CHECK-NOT: fusion.group
// CHECK: func.return %[[E]], %[[N]]
func.func @horizontal_siblings(%x: tensor<64x32xf32>) -> (tensor<64x32xf32>, tensor<64x32xf32>) {
  %e = nn.exp %x : tensor<64x32xf32>
  %n = nn.neg %x : tensor<64x32xf32>
  func.return %e, %n : tensor<64x32xf32>, tensor<64x32xf32>
}

// -----

// Decomposed softmax: two reductions over the same rows with their
// elementwise prologue and epilogue, one kernel.
// CHECK-LABEL: func.func @softmax
// CHECK: %[[Y:.*]] = fusion.group (%[[X:.*]]) {name = "g0", kind = "reduction"}
// CHECK-NEXT: ^bb0(%[[XA:.*]]: tensor<64x32xf32>):
// CHECK-NEXT: %[[M:.*]] = nn.reduce_max %[[XA]]
// CHECK-NEXT: %[[D:.*]] = nn.sub %[[XA]], %[[M]]
// CHECK-NEXT: %[[E:.*]] = nn.exp %[[D]]
// CHECK-NEXT: %[[S:.*]] = nn.reduce_sum %[[E]]
// CHECK-NEXT: %[[R:.*]] = nn.div %[[E]], %[[S]]
// CHECK-NEXT: fusion.yield %[[R]]
// CHECK-NOT: nn.
// CHECK: func.return %[[Y]]
func.func @softmax(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %y = nn.softmax %x {axis = -1} : tensor<64x32xf32>
  func.return %y : tensor<64x32xf32>
}

// -----

// A reduction absorbs its elementwise prologue.
// CHECK-LABEL: func.func @sum_gelu
// CHECK: fusion.group (%[[X:.*]]) {name = "g0", kind = "reduction"}
// CHECK: %[[GE:.*]] = nn.gelu
// CHECK-NEXT: %[[S:.*]] = nn.reduce_sum %[[GE]] {axes = [1]}
// CHECK-NEXT: fusion.yield %[[S]] : tensor<64xf32>
func.func @sum_gelu(%x: tensor<64x32xf32>) -> tensor<64xf32> {
  %g = nn.gelu %x : tensor<64x32xf32>
  %s = nn.reduce_sum %g {axes = [1]} : (tensor<64x32xf32>) -> tensor<64xf32>
  func.return %s : tensor<64xf32>
}

// -----

// Residual add + layer norm (decomposed) + gelu: one kernel; the epsilon
// constant stays outside and enters as an operand.
// CHECK-LABEL: func.func @add_layernorm_gelu
// CHECK: %[[EPS:.*]] = nn.constant dense<1.0e-05>
// CHECK-NEXT: %[[Y:.*]] = fusion.group (%{{.*}}, %{{.*}}, %[[EPS]], %{{.*}}, %{{.*}}) {name = "g0", kind = "reduction"}
// CHECK: %[[S:.*]] = nn.add
// CHECK-NEXT: %[[MEAN:.*]] = nn.reduce_mean %[[S]]
// CHECK: nn.reduce_mean
// CHECK: %[[N:.*]] = nn.add %{{.*}}, %{{.*}} : (tensor<64x32xf32>, tensor<32xf32>)
// CHECK-NEXT: %[[G:.*]] = nn.gelu %[[N]]
// CHECK-NEXT: fusion.yield %[[G]]
// CHECK-NOT: fusion.group
// CHECK: func.return %[[Y]]
func.func @add_layernorm_gelu(%a: tensor<64x32xf32>, %r: tensor<64x32xf32>, %g: tensor<32xf32>, %b: tensor<32xf32>) -> tensor<64x32xf32> {
  %s = nn.add %a, %r : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  %n = nn.layer_norm %s, %g, %b {axis = -1, epsilon = 1.0e-05} : (tensor<64x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<64x32xf32>
  %y = nn.gelu %n : tensor<64x32xf32>
  func.return %y : tensor<64x32xf32>
}

// -----

// matmul + bias + activation + residual add: a contraction with its epilogue.
// CHECK-LABEL: func.func @matmul_epilogue
// CHECK-SAME: (%[[X:.*]]: tensor<64x32xf32>, %[[W:.*]]: tensor<32x16xf32>, %[[B:.*]]: tensor<16xf32>, %[[RES:.*]]: tensor<64x16xf32>)
// CHECK: %[[Y:.*]] = fusion.group (%[[X]], %[[W]], %[[B]], %[[RES]]) {name = "g0", kind = "contraction"}
// CHECK-NEXT: ^bb0(%[[XA:.*]]: tensor<64x32xf32>, %[[WA:.*]]: tensor<32x16xf32>, %[[BA:.*]]: tensor<16xf32>, %[[RA:.*]]: tensor<64x16xf32>):
// CHECK-NEXT: %[[M:.*]] = nn.matmul %[[XA]], %[[WA]]
// CHECK-NEXT: %[[A:.*]] = nn.add %[[M]], %[[BA]]
// CHECK-NEXT: %[[GE:.*]] = nn.gelu %[[A]] {approximate = "tanh"}
// CHECK-NEXT: %[[R:.*]] = nn.add %[[GE]], %[[RA]]
// CHECK-NEXT: fusion.yield %[[R]]
// CHECK-NOT: nn.
// CHECK: func.return %[[Y]]
func.func @matmul_epilogue(%x: tensor<64x32xf32>, %w: tensor<32x16xf32>, %b: tensor<16xf32>, %res: tensor<64x16xf32>) -> tensor<64x16xf32> {
  %m = nn.matmul %x, %w : (tensor<64x32xf32>, tensor<32x16xf32>) -> tensor<64x16xf32>
  %a = nn.add %m, %b : (tensor<64x16xf32>, tensor<16xf32>) -> tensor<64x16xf32>
  %g = nn.gelu %a {approximate = "tanh"} : tensor<64x16xf32>
  %y = nn.add %g, %res : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64x16xf32>
  func.return %y : tensor<64x16xf32>
}

// -----

// conv2d + bias + clamp: a window op with its epilogue.
// CHECK-LABEL: func.func @conv_clamp
// CHECK: fusion.group ({{.*}}) {name = "g0", kind = "window"}
// CHECK: %[[C:.*]] = nn.conv2d
// CHECK-NEXT: %[[A:.*]] = nn.add %[[C]]
// CHECK-NEXT: %[[Y:.*]] = nn.clamp %[[A]]
// CHECK-NEXT: fusion.yield %[[Y]]
func.func @conv_clamp(%x: tensor<1x8x10x10xf32>, %w: tensor<16x8x3x3xf32>, %b: tensor<16x1x1xf32>) -> tensor<1x16x8x8xf32> {
  %c = nn.conv2d %x, %w : (tensor<1x8x10x10xf32>, tensor<16x8x3x3xf32>) -> tensor<1x16x8x8xf32>
  %a = nn.add %c, %b : (tensor<1x16x8x8xf32>, tensor<16x1x1xf32>) -> tensor<1x16x8x8xf32>
  %y = nn.clamp %a {min = 0.0, max = 6.0} : tensor<1x16x8x8xf32>
  func.return %y : tensor<1x16x8x8xf32>
}

// -----

// Depthwise conv + bias + clamp.
// CHECK-LABEL: func.func @depthwise_bias_clamp
// CHECK: fusion.group ({{.*}}) {name = "g0", kind = "window"}
// CHECK: %[[C:.*]] = nn.conv2d {{.*}} {pads = [1, 1, 1, 1], groups = 8}
// CHECK-NEXT: %[[A:.*]] = nn.add %[[C]]
// CHECK-NEXT: %[[Y:.*]] = nn.clamp %[[A]]
// CHECK-NEXT: fusion.yield %[[Y]]
func.func @depthwise_bias_clamp(%x: tensor<1x8x10x10xf32>, %w: tensor<8x1x3x3xf32>, %b: tensor<8x1x1xf32>) -> tensor<1x8x10x10xf32> {
  %c = nn.conv2d %x, %w {pads = [1, 1, 1, 1], groups = 8} : (tensor<1x8x10x10xf32>, tensor<8x1x3x3xf32>) -> tensor<1x8x10x10xf32>
  %a = nn.add %c, %b : (tensor<1x8x10x10xf32>, tensor<8x1x1xf32>) -> tensor<1x8x10x10xf32>
  %y = nn.clamp %a {min = 0.0, max = 6.0} : tensor<1x8x10x10xf32>
  func.return %y : tensor<1x8x10x10xf32>
}

// -----

// %e is read inside the group and returned: the group writes it as a second result.
// CHECK-LABEL: func.func @multi_consumer
// CHECK: %[[E:.*]], %[[R:.*]] = fusion.group
// CHECK: %[[EI:.*]] = nn.exp
// CHECK-NEXT: %[[RI:.*]] = nn.relu %[[EI]]
// CHECK-NEXT: fusion.yield %[[EI]], %[[RI]]
// CHECK: func.return %[[E]], %[[R]]
func.func @multi_consumer(%x: tensor<64x32xf32>) -> (tensor<64x32xf32>, tensor<64x32xf32>) {
  %e = nn.exp %x : tensor<64x32xf32>
  %r = nn.relu %e : tensor<64x32xf32>
  func.return %e, %r : tensor<64x32xf32>, tensor<64x32xf32>
}

// -----

// A transpose feeding a matmul operand folds into the operand load.
// CHECK-LABEL: func.func @transpose_into_matmul
// CHECK: fusion.group (%[[K:.*]], %[[Q:.*]]) {name = "g0", kind = "contraction"}
// CHECK-NEXT: ^bb0(%[[KA:.*]]: tensor<2x16x8xf32>, %[[QA:.*]]: tensor<2x16x8xf32>):
// CHECK-NEXT: %[[KT:.*]] = nn.transpose %[[KA]]
// CHECK-NEXT: %[[S:.*]] = nn.matmul %[[QA]], %[[KT]]
// CHECK-NEXT: fusion.yield %[[S]]
func.func @transpose_into_matmul(%q: tensor<2x16x8xf32>, %k: tensor<2x16x8xf32>) -> tensor<2x16x16xf32> {
  %kt = nn.transpose %k {perm = [0, 2, 1]} : (tensor<2x16x8xf32>) -> tensor<2x8x16xf32>
  %s = nn.matmul %q, %kt : (tensor<2x16x8xf32>, tensor<2x8x16xf32>) -> tensor<2x16x16xf32>
  func.return %s : tensor<2x16x16xf32>
}

// -----

// Constants are program data: the group takes them as operands.
// CHECK-LABEL: func.func @constants_stay_outside
// CHECK: %[[C:.*]] = nn.constant dense<2.0> : tensor<f32>
// CHECK-NEXT: fusion.group (%[[X:.*]], %[[C]]) {name = "g0", kind = "pointwise"}
// CHECK-NEXT: ^bb0(%[[XA:.*]]: tensor<64xf32>, %[[CA:.*]]: tensor<f32>):
// CHECK-NEXT: %[[M:.*]] = nn.mul %[[XA]], %[[CA]]
// CHECK-NEXT: nn.exp %[[M]]
func.func @constants_stay_outside(%x: tensor<64xf32>) -> tensor<64xf32> {
  %c = nn.constant dense<2.0> : tensor<f32>
  %m = nn.mul %x, %c : (tensor<64xf32>, tensor<f32>) -> tensor<64xf32>
  %e = nn.exp %m : tensor<64xf32>
  func.return %e : tensor<64xf32>
}

// -----

// %e feeds two row reductions over different iteration spaces, which cannot
// share a kernel: the cheap exp is recomputed in the second group instead of
// being written by the first and read back.
// CHECK-LABEL: func.func @recompute
// CHECK-SAME: (%[[X:.*]]: tensor<4x8x16xf32>)
// CHECK: %[[Y1:.*]] = fusion.group (%[[X]]) {name = "g0", kind = "reduction"}
// CHECK: %[[E1:.*]] = nn.exp
// CHECK: fusion.yield %{{.*}} : tensor<4x8x16xf32>
// CHECK-NEXT: }
// CHECK-NEXT: %[[Y2:.*]] = fusion.group (%[[X]]) {name = "g1", kind = "reduction"}
// CHECK-NEXT: ^bb0(%[[XB:.*]]: tensor<4x8x16xf32>):
// CHECK-NEXT: %[[E2:.*]] = nn.exp %[[XB]]
// CHECK-NEXT: %[[R2:.*]] = nn.reduce_max %[[E2]] {axes = [1, 2], keepdims = true}
// CHECK-NEXT: %[[S2:.*]] = nn.sub %[[E2]], %[[R2]]
// CHECK-NEXT: fusion.yield %[[S2]]
// CHECK: func.return %[[Y1]], %[[Y2]]
func.func @recompute(%x: tensor<4x8x16xf32>) -> (tensor<4x8x16xf32>, tensor<4x8x16xf32>) {
  %e = nn.exp %x : tensor<4x8x16xf32>
  %r1 = nn.reduce_sum %e {axes = [2], keepdims = true} : (tensor<4x8x16xf32>) -> tensor<4x8x1xf32>
  %y1 = nn.div %e, %r1 : (tensor<4x8x16xf32>, tensor<4x8x1xf32>) -> tensor<4x8x16xf32>
  %r2 = nn.reduce_max %e {axes = [1, 2], keepdims = true} : (tensor<4x8x16xf32>) -> tensor<4x1x1xf32>
  %y2 = nn.sub %e, %r2 : (tensor<4x8x16xf32>, tensor<4x1x1xf32>) -> tensor<4x8x16xf32>
  func.return %y1, %y2 : tensor<4x8x16xf32>, tensor<4x8x16xf32>
}
