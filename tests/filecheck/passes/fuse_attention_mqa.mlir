// RUN: fusec %s -p decompose,fuse-attention --remarks 2>&1 >/dev/null | filecheck %s
// RUN: fusec %s -p decompose,fuse-attention,form-fusion-groups | filecheck %s --check-prefix=IR

// Multi-query attention with K and V broadcast over the heads by an explicit
// nn.broadcast_to: the broadcasts join the attention group, which reads the
// one K/V head in place (stride 0 over the heads); no copy kernel is left.

// CHECK: remark: fused attention nn.matmul (%s) .. nn.matmul (%o) into one kernel, group attn0
// IR-LABEL: func.func @mqa
// IR: %{{.*}} = fusion.group (%k, %v, %q) {name = "attn0", kind = "attention"
// IR: nn.broadcast_to %{{.*}} : (tensor<2x1x16x8xf32>) -> tensor<2x4x16x8xf32>
// IR: nn.transpose
// IR: fusion.yield
// IR-NOT: fusion.group
// IR: func.return
func.func @mqa(%q: tensor<2x4x16x8xf32>, %k: tensor<2x1x16x8xf32>, %v: tensor<2x1x16x8xf32>) -> tensor<2x4x16x8xf32> {
  %kb = nn.broadcast_to %k : (tensor<2x1x16x8xf32>) -> tensor<2x4x16x8xf32>
  %vb = nn.broadcast_to %v : (tensor<2x1x16x8xf32>) -> tensor<2x4x16x8xf32>
  %kt = nn.transpose %kb {perm = [0, 1, 3, 2]} : (tensor<2x4x16x8xf32>) -> tensor<2x4x8x16xf32>
  %s = nn.matmul %q, %kt : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  %c = nn.constant dense<0.35> : tensor<f32>
  %x = nn.mul %s, %c : (tensor<2x4x16x16xf32>, tensor<f32>) -> tensor<2x4x16x16xf32>
  %p = nn.softmax %x {axis = -1} : tensor<2x4x16x16xf32>
  %o = nn.matmul %p, %vb : (tensor<2x4x16x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  func.return %o : tensor<2x4x16x8xf32>
}
