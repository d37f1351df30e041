// RUN: fusec %s --split-input-file -p 'decompose,fuse-attention{block_q=16 block_k=16 rows=2 cols=2}' --remarks 2>&1 >/dev/null | filecheck %s
// RUN: fusec %s --split-input-file -p 'decompose,fuse-attention{block_q=16 block_k=16 rows=2 cols=2}' | filecheck %s --check-prefix=IR

// A scale of Q (or K) by a constant before Q Kᵀ moves onto the scores
// (passes/fuse_attention_scale.py): the attention group reads Q unscaled,
// here in place from a packed projection, and scales its scores; no op
// scales Q outside the group.

// CHECK: remark: Q's scale nn.mul (%scaled) moved onto the scores of the attention at nn.matmul (%o): no kernel of its own
// IR-LABEL: func.func @packed
// IR-NEXT: %{{.*}} = fusion.group (%qkv) {name = "attn0", kind = "attention"
// IR: %[[C:.*]] = nn.constant dense<0.35355338> : tensor<f32>
// IR: %[[Q:.*]] = nn.reshape %qs
// IR: %[[S:.*]] = nn.matmul %[[Q]], %kt
// IR-NEXT: %[[X:.*]] = nn.mul %[[S]], %[[C]] : (tensor<2x2x16x16xf32>, tensor<f32>) -> tensor<2x2x16x16xf32>
// IR-NEXT: nn.reduce_max %[[X]]
// IR: fusion.yield
// IR-NEXT: }
// IR-NEXT: func.return
func.func @packed(%qkv: tensor<2x16x48xf32>) -> tensor<2x2x16x8xf32> {
  %r = nn.reshape %qkv : (tensor<2x16x48xf32>) -> tensor<2x16x3x2x8xf32>
  %p = nn.transpose %r {perm = [2, 0, 3, 1, 4]} : (tensor<2x16x3x2x8xf32>) -> tensor<3x2x2x16x8xf32>
  %qs = nn.slice %p {starts = [0, 0, 0, 0, 0], limits = [1, 2, 2, 16, 8]} : (tensor<3x2x2x16x8xf32>) -> tensor<1x2x2x16x8xf32>
  %ks = nn.slice %p {starts = [1, 0, 0, 0, 0], limits = [2, 2, 2, 16, 8]} : (tensor<3x2x2x16x8xf32>) -> tensor<1x2x2x16x8xf32>
  %vs = nn.slice %p {starts = [2, 0, 0, 0, 0], limits = [3, 2, 2, 16, 8]} : (tensor<3x2x2x16x8xf32>) -> tensor<1x2x2x16x8xf32>
  %q = nn.reshape %qs : (tensor<1x2x2x16x8xf32>) -> tensor<2x2x16x8xf32>
  %k = nn.reshape %ks : (tensor<1x2x2x16x8xf32>) -> tensor<2x2x16x8xf32>
  %v = nn.reshape %vs : (tensor<1x2x2x16x8xf32>) -> tensor<2x2x16x8xf32>
  %c = nn.constant dense<0.35355339> : tensor<f32>
  %scaled = nn.mul %q, %c : (tensor<2x2x16x8xf32>, tensor<f32>) -> tensor<2x2x16x8xf32>
  %kt = nn.transpose %k {perm = [0, 1, 3, 2]} : (tensor<2x2x16x8xf32>) -> tensor<2x2x8x16xf32>
  %s = nn.matmul %scaled, %kt : (tensor<2x2x16x8xf32>, tensor<2x2x8x16xf32>) -> tensor<2x2x16x16xf32>
  %pr = nn.softmax %s {axis = -1} : tensor<2x2x16x16xf32>
  %o = nn.matmul %pr, %v : (tensor<2x2x16x16xf32>, tensor<2x2x16x8xf32>) -> tensor<2x2x16x8xf32>
  func.return %o : tensor<2x2x16x8xf32>
}

// -----

// bf16 as PyTorch writes `q * 0.1767...`: widened to f32, scaled, rounded
// back; the three move together, the scores' f32 scale of f32 scores. K
// divided by a constant, then transposed, moves too.

// CHECK: remark: Q's scale nn.mul (%qm) moved onto the scores of the attention at nn.matmul (%o): no kernel of its own
// CHECK: remark: K's scale nn.div (%ks) moved onto the scores of the attention at nn.matmul (%o): no kernel of its own
// IR-LABEL: func.func @half
// IR-NEXT: %{{.*}} = fusion.group (%k, %q, %v)
// IR: %[[KT:.*]] = nn.transpose %k_1
// IR: %[[S:.*]] = nn.matmul %q_1, %[[KT]]
// IR-NEXT: %[[D:.*]] = nn.div %[[S]], %{{.*}} : (tensor<1x2x12x12xbf16>, tensor<bf16>) -> tensor<1x2x12x12xbf16>
// IR-NEXT: %[[W:.*]] = nn.cast %[[D]] : (tensor<1x2x12x12xbf16>) -> tensor<1x2x12x12xf32>
// IR-NEXT: %[[M:.*]] = nn.mul %[[W]], %{{.*}} : (tensor<1x2x12x12xf32>, tensor<f32>) -> tensor<1x2x12x12xf32>
// IR-NEXT: %[[N:.*]] = nn.cast %[[M]] : (tensor<1x2x12x12xf32>) -> tensor<1x2x12x12xbf16>
// IR-NEXT: nn.reduce_max %[[N]]
// IR: fusion.yield
func.func @half(%q: tensor<1x2x12x8xbf16>, %k: tensor<1x2x12x8xbf16>, %v: tensor<1x2x12x8xbf16>) -> tensor<1x2x12x8xbf16> {
  %qw = nn.cast %q : (tensor<1x2x12x8xbf16>) -> tensor<1x2x12x8xf32>
  %c = nn.constant dense<0.17677669> : tensor<f32>
  %qm = nn.mul %qw, %c : (tensor<1x2x12x8xf32>, tensor<f32>) -> tensor<1x2x12x8xf32>
  %qs = nn.cast %qm : (tensor<1x2x12x8xf32>) -> tensor<1x2x12x8xbf16>
  %d = nn.constant dense<2.0> : tensor<bf16>
  %ks = nn.div %k, %d : (tensor<1x2x12x8xbf16>, tensor<bf16>) -> tensor<1x2x12x8xbf16>
  %kt = nn.transpose %ks {perm = [0, 1, 3, 2]} : (tensor<1x2x12x8xbf16>) -> tensor<1x2x8x12xbf16>
  %s = nn.matmul %qs, %kt : (tensor<1x2x12x8xbf16>, tensor<1x2x8x12xbf16>) -> tensor<1x2x12x12xbf16>
  %pr = nn.softmax %s {axis = -1} : tensor<1x2x12x12xbf16>
  %o = nn.matmul %pr, %v : (tensor<1x2x12x12xbf16>, tensor<1x2x12x8xbf16>) -> tensor<1x2x12x8xbf16>
  func.return %o : tensor<1x2x12x8xbf16>
}

// -----

// The constant on the left: `0.125 * q`.

// CHECK: remark: Q's scale nn.mul (%qs) moved onto the scores of the attention at nn.matmul (%o): no kernel of its own
// IR-LABEL: func.func @left
// IR-NEXT: %{{.*}} = fusion.group (%q, %kt, %v)
// IR: %[[S:.*]] = nn.matmul %q_1, %kt_1
// IR-NEXT: %[[X:.*]] = nn.mul %[[S]], %{{.*}} : (tensor<12x12xf32>, tensor<f32>) -> tensor<12x12xf32>
// IR-NEXT: nn.reduce_max %[[X]]
func.func @left(%q: tensor<12x8xf32>, %kt: tensor<8x12xf32>, %v: tensor<12x8xf32>) -> tensor<12x8xf32> {
  %c = nn.constant dense<0.125> : tensor<f32>
  %qs = nn.mul %c, %q : (tensor<f32>, tensor<12x8xf32>) -> tensor<12x8xf32>
  %s = nn.matmul %qs, %kt : (tensor<12x8xf32>, tensor<8x12xf32>) -> tensor<12x12xf32>
  %pr = nn.softmax %s {axis = -1} : tensor<12x12xf32>
  %o = nn.matmul %pr, %v : (tensor<12x12xf32>, tensor<12x8xf32>) -> tensor<12x8xf32>
  func.return %o : tensor<12x8xf32>
}

// -----

// The scaled Q is also a result: its scale stays outside the group, which
// reads the scaled Q.

// CHECK: missed: Q's scale nn.mul (%qs) stays outside the attention at nn.matmul (%o): nn.mul (%qs) is also read by func.return
// IR-LABEL: func.func @returned
// IR: %[[QS:.*]] = nn.mul %q, %c
// IR-NEXT: %{{.*}} = fusion.group (%[[QS]], %kt, %v)
// IR-NOT: nn.mul
// IR: fusion.yield
func.func @returned(%q: tensor<12x8xf32>, %kt: tensor<8x12xf32>, %v: tensor<12x8xf32>) -> (tensor<12x8xf32>, tensor<12x8xf32>) {
  %c = nn.constant dense<0.125> : tensor<f32>
  %qs = nn.mul %q, %c : (tensor<12x8xf32>, tensor<f32>) -> tensor<12x8xf32>
  %s = nn.matmul %qs, %kt : (tensor<12x8xf32>, tensor<8x12xf32>) -> tensor<12x12xf32>
  %pr = nn.softmax %s {axis = -1} : tensor<12x12xf32>
  %o = nn.matmul %pr, %v : (tensor<12x12xf32>, tensor<12x8xf32>) -> tensor<12x8xf32>
  func.return %o, %qs : tensor<12x8xf32>, tensor<12x8xf32>
}

// -----

// Scores through 8 elementwise ops already: with the scale they would be 9,
// past the matcher's reach (MAX_SCORE_DEPTH); the scale stays outside.

// CHECK: missed: Q's scale nn.mul (%qs) stays outside the attention at nn.matmul (%o): with it the scores would go through more than 8 elementwise ops
// CHECK-NEXT: remark: fused attention nn.matmul (%s) .. nn.matmul (%o)
// IR-LABEL: func.func @deep
// IR: %[[QS:.*]] = nn.mul %q, %c
// IR-NEXT: %{{.*}} = fusion.group (%[[QS]], %kt, %m, %v)
func.func @deep(%q: tensor<12x8xf32>, %kt: tensor<8x12xf32>, %v: tensor<12x8xf32>, %m: tensor<12xf32>) -> tensor<12x8xf32> {
  %c = nn.constant dense<0.125> : tensor<f32>
  %qs = nn.mul %q, %c : (tensor<12x8xf32>, tensor<f32>) -> tensor<12x8xf32>
  %s = nn.matmul %qs, %kt : (tensor<12x8xf32>, tensor<8x12xf32>) -> tensor<12x12xf32>
  %x0 = nn.add %s, %m : (tensor<12x12xf32>, tensor<12xf32>) -> tensor<12x12xf32>
  %x1 = nn.add %x0, %m : (tensor<12x12xf32>, tensor<12xf32>) -> tensor<12x12xf32>
  %x2 = nn.add %x1, %m : (tensor<12x12xf32>, tensor<12xf32>) -> tensor<12x12xf32>
  %x3 = nn.add %x2, %m : (tensor<12x12xf32>, tensor<12xf32>) -> tensor<12x12xf32>
  %x4 = nn.add %x3, %m : (tensor<12x12xf32>, tensor<12xf32>) -> tensor<12x12xf32>
  %x5 = nn.add %x4, %m : (tensor<12x12xf32>, tensor<12xf32>) -> tensor<12x12xf32>
  %x6 = nn.add %x5, %m : (tensor<12x12xf32>, tensor<12xf32>) -> tensor<12x12xf32>
  %x7 = nn.add %x6, %m : (tensor<12x12xf32>, tensor<12xf32>) -> tensor<12x12xf32>
  %pr = nn.softmax %x7 {axis = -1} : tensor<12x12xf32>
  %o = nn.matmul %pr, %v : (tensor<12x12xf32>, tensor<12x8xf32>) -> tensor<12x8xf32>
  func.return %o : tensor<12x8xf32>
}
