// RUN: fusec %s --split-input-file -p unmerge-broadcasts,dce | filecheck %s
// RUN: fusec %s --split-input-file -p 'decompose,unmerge-broadcasts,cse,dce,fuse-attention{remarks=false},form-fusion-groups{remarks=false}' | filecheck %s --check-prefix=GROUP

// Grouped-query attention, 4 query heads over 2 K/V heads: Q is split to
// [1, 2, 2, 8, 4], K and V are read unbroadcast as [1, 2, 1, 8, 4] (the
// matmuls broadcast their batch axes), the output is merged back; no
// broadcast_to is left, and the attention is one group reading %k and %v.
// CHECK-LABEL: func.func @gqa
// CHECK-NOT: nn.broadcast_to
// CHECK-DAG: %[[K1:.*]] = nn.reshape %k : (tensor<1x2x8x4xf32>) -> tensor<1x2x1x8x4xf32>
// CHECK-DAG: %[[V1:.*]] = nn.reshape %v : (tensor<1x2x8x4xf32>) -> tensor<1x2x1x8x4xf32>
// CHECK-DAG: %[[KT:.*]] = nn.transpose %[[K1]] {perm = [0, 1, 2, 4, 3]} : (tensor<1x2x1x8x4xf32>) -> tensor<1x2x1x4x8xf32>
// CHECK-DAG: %[[Q:.*]] = nn.reshape %q : (tensor<1x4x8x4xf32>) -> tensor<1x2x2x8x4xf32>
// CHECK: %[[S:.*]] = nn.matmul %[[Q]], %[[KT]] : (tensor<1x2x2x8x4xf32>, tensor<1x2x1x4x8xf32>) -> tensor<1x2x2x8x8xf32>
// CHECK: %[[P:.*]] = nn.softmax %{{.*}} {axis = 4} : tensor<1x2x2x8x8xf32>
// CHECK: %[[O:.*]] = nn.matmul %[[P]], %[[V1]] : (tensor<1x2x2x8x8xf32>, tensor<1x2x1x8x4xf32>) -> tensor<1x2x2x8x4xf32>
// CHECK: %[[R:.*]] = nn.reshape %[[O]] : (tensor<1x2x2x8x4xf32>) -> tensor<1x4x8x4xf32>
// CHECK-NEXT: func.return %[[R]]
// GROUP-LABEL: func.func @gqa
// GROUP: fusion.group (%{{.*}}) {name = "attn0", kind = "attention"
// GROUP-NOT: fusion.group
func.func @gqa(%q: tensor<1x4x8x4xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x2x8x4xf32>) -> tensor<1x4x8x4xf32> {
  %k1 = nn.reshape %k : (tensor<1x2x8x4xf32>) -> tensor<1x2x1x8x4xf32>
  %k2 = nn.broadcast_to %k1 : (tensor<1x2x1x8x4xf32>) -> tensor<1x2x2x8x4xf32>
  %k3 = nn.reshape %k2 : (tensor<1x2x2x8x4xf32>) -> tensor<1x4x8x4xf32>
  %v1 = nn.reshape %v : (tensor<1x2x8x4xf32>) -> tensor<1x2x1x8x4xf32>
  %v2 = nn.broadcast_to %v1 : (tensor<1x2x1x8x4xf32>) -> tensor<1x2x2x8x4xf32>
  %v3 = nn.reshape %v2 : (tensor<1x2x2x8x4xf32>) -> tensor<1x4x8x4xf32>
  %kt = nn.transpose %k3 {perm = [0, 1, 3, 2]} : (tensor<1x4x8x4xf32>) -> tensor<1x4x4x8xf32>
  %s = nn.matmul %q, %kt : (tensor<1x4x8x4xf32>, tensor<1x4x4x8xf32>) -> tensor<1x4x8x8xf32>
  %p = nn.softmax %s {axis = -1} : tensor<1x4x8x8xf32>
  %o = nn.matmul %p, %v3 : (tensor<1x4x8x8xf32>, tensor<1x4x8x4xf32>) -> tensor<1x4x8x4xf32>
  func.return %o : tensor<1x4x8x4xf32>
}

// -----

// A pointwise reader: x is split, y read unbroadcast, the result merged
// back; the bias [4] broadcasts as it is. One pointwise group.
// CHECK-LABEL: func.func @pointwise
// CHECK-NEXT: %[[Y1:.*]] = nn.reshape %y : (tensor<2x8xf32>) -> tensor<2x1x8xf32>
// CHECK-NEXT: %[[X:.*]] = nn.reshape %x : (tensor<6x8xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT: %[[A:.*]] = nn.add %[[X]], %[[Y1]] : (tensor<2x3x8xf32>, tensor<2x1x8xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT: %[[B:.*]] = nn.mul %[[A]], %b : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT: %[[R:.*]] = nn.reshape %[[B]] : (tensor<2x3x8xf32>) -> tensor<6x8xf32>
// CHECK-NEXT: func.return %[[R]]
// GROUP-LABEL: func.func @pointwise
// GROUP: fusion.group (%{{.*}}) {name = "g0", kind = "pointwise"}
// GROUP-NOT: fusion.group
func.func @pointwise(%x: tensor<6x8xf32>, %y: tensor<2x8xf32>, %b: tensor<8xf32>) -> tensor<6x8xf32> {
  %y1 = nn.reshape %y : (tensor<2x8xf32>) -> tensor<2x1x8xf32>
  %y2 = nn.broadcast_to %y1 : (tensor<2x1x8xf32>) -> tensor<2x3x8xf32>
  %y3 = nn.reshape %y2 : (tensor<2x3x8xf32>) -> tensor<6x8xf32>
  %a = nn.add %x, %y3 : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
  %m = nn.mul %a, %b : (tensor<6x8xf32>, tensor<8xf32>) -> tensor<6x8xf32>
  func.return %m : tensor<6x8xf32>
}

// -----

// A sum over the merged axis counts every copy: it cannot read the split
// form, so the merge stays for every reader.
// CHECK-LABEL: func.func @sum_over_copies
// GROUP-LABEL: func.func @sum_over_copies
// CHECK: nn.broadcast_to
// CHECK: nn.reduce_sum %y3 {axes = [0], keepdims = true}
// CHECK: nn.add %x, %y3
func.func @sum_over_copies(%x: tensor<6x8xf32>, %y: tensor<2x8xf32>) -> (tensor<1x8xf32>, tensor<6x8xf32>) {
  %y1 = nn.reshape %y : (tensor<2x8xf32>) -> tensor<2x1x8xf32>
  %y2 = nn.broadcast_to %y1 : (tensor<2x1x8xf32>) -> tensor<2x3x8xf32>
  %y3 = nn.reshape %y2 : (tensor<2x3x8xf32>) -> tensor<6x8xf32>
  %r = nn.reduce_sum %y3 {axes = [0], keepdims = true} : (tensor<6x8xf32>) -> tensor<1x8xf32>
  %a = nn.add %x, %y3 : (tensor<6x8xf32>, tensor<6x8xf32>) -> tensor<6x8xf32>
  func.return %r, %a : tensor<1x8xf32>, tensor<6x8xf32>
}

// -----

// A group of one (G = 1): the broadcast expands nothing and is dropped.
// CHECK-LABEL: func.func @one_group
// CHECK-NOT: nn.broadcast_to
// CHECK: func.return
func.func @one_group(%k: tensor<2x8x4xf32>) -> tensor<2x8x4xf32> {
  %k1 = nn.reshape %k : (tensor<2x8x4xf32>) -> tensor<2x1x8x4xf32>
  %k2 = nn.broadcast_to %k1 : (tensor<2x1x8x4xf32>) -> tensor<2x1x8x4xf32>
  %k3 = nn.reshape %k2 : (tensor<2x1x8x4xf32>) -> tensor<2x8x4xf32>
  func.return %k3 : tensor<2x8x4xf32>
}

// -----

// Shifted windows (timm's Swin): the scores of B*nW = 4 windows are split to
// [B, nW] = [2, 2] for a mask per window and merged back before the softmax.
// The split moves above Q Kᵀ (Q, Kᵀ and the bias reshaped), the merge back
// seeds the softmax and P V (V reshaped): the attention runs on
// [2, 2, 3, ...] with no reshape between its matmuls, one group.
// CHECK-LABEL: func.func @shifted_windows
// CHECK-DAG: %[[Q:.*]] = nn.reshape %q : (tensor<4x3x4x8xf32>) -> tensor<2x2x3x4x8xf32>
// CHECK-DAG: %[[KT:.*]] = nn.reshape %kt : (tensor<4x3x8x4xf32>) -> tensor<2x2x3x8x4xf32>
// CHECK: %[[S:.*]] = nn.matmul %[[Q]], %[[KT]] : (tensor<2x2x3x4x8xf32>, tensor<2x2x3x8x4xf32>) -> tensor<2x2x3x4x4xf32>
// CHECK: %[[B:.*]] = nn.reshape %bias : (tensor<1x3x4x4xf32>) -> tensor<1x1x3x4x4xf32>
// CHECK: %[[X:.*]] = nn.add %[[S]], %[[B]] : (tensor<2x2x3x4x4xf32>, tensor<1x1x3x4x4xf32>) -> tensor<2x2x3x4x4xf32>
// CHECK: %[[Y:.*]] = nn.add %[[X]], %mask : (tensor<2x2x3x4x4xf32>, tensor<1x2x1x4x4xf32>) -> tensor<2x2x3x4x4xf32>
// CHECK: %[[P:.*]] = nn.softmax %[[Y]] {axis = 4} : tensor<2x2x3x4x4xf32>
// CHECK: %[[V:.*]] = nn.reshape %v : (tensor<4x3x4x8xf32>) -> tensor<2x2x3x4x8xf32>
// CHECK: %[[O:.*]] = nn.matmul %[[P]], %[[V]] : (tensor<2x2x3x4x4xf32>, tensor<2x2x3x4x8xf32>) -> tensor<2x2x3x4x8xf32>
// CHECK: %[[R:.*]] = nn.reshape %[[O]] : (tensor<2x2x3x4x8xf32>) -> tensor<4x3x4x8xf32>
// CHECK-NEXT: func.return %[[R]]
// GROUP-LABEL: func.func @shifted_windows
// GROUP: fusion.group (%q, %kt, %{{.*}}, %mask, %v) {name = "attn0", kind = "attention"
// GROUP-NOT: fusion.group
func.func @shifted_windows(%q: tensor<4x3x4x8xf32>, %kt: tensor<4x3x8x4xf32>, %v: tensor<4x3x4x8xf32>, %bias: tensor<1x3x4x4xf32>, %mask: tensor<1x2x1x4x4xf32>) -> tensor<4x3x4x8xf32> {
  %s = nn.matmul %q, %kt : (tensor<4x3x4x8xf32>, tensor<4x3x8x4xf32>) -> tensor<4x3x4x4xf32>
  %x = nn.add %s, %bias : (tensor<4x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<4x3x4x4xf32>
  %x5 = nn.reshape %x : (tensor<4x3x4x4xf32>) -> tensor<2x2x3x4x4xf32>
  %y5 = nn.add %x5, %mask : (tensor<2x2x3x4x4xf32>, tensor<1x2x1x4x4xf32>) -> tensor<2x2x3x4x4xf32>
  %y = nn.reshape %y5 : (tensor<2x2x3x4x4xf32>) -> tensor<4x3x4x4xf32>
  %p = nn.softmax %y {axis = -1} : tensor<4x3x4x4xf32>
  %o = nn.matmul %p, %v : (tensor<4x3x4x4xf32>, tensor<4x3x4x8xf32>) -> tensor<4x3x4x8xf32>
  func.return %o : tensor<4x3x4x8xf32>
}

// -----

// Scores that another op reads too stay where they are: moving the split
// above Q Kᵀ would compute the product twice.
// CHECK-LABEL: func.func @scores_read_twice
// GROUP-LABEL: func.func @scores_read_twice
// CHECK: %[[S:.*]] = nn.matmul %q, %kt : (tensor<4x3x4x8xf32>, tensor<4x3x8x4xf32>) -> tensor<4x3x4x4xf32>
// CHECK: nn.reshape %[[S]] : (tensor<4x3x4x4xf32>) -> tensor<2x2x3x4x4xf32>
func.func @scores_read_twice(%q: tensor<4x3x4x8xf32>, %kt: tensor<4x3x8x4xf32>, %mask: tensor<1x2x1x4x4xf32>) -> (tensor<2x2x3x4x4xf32>, tensor<4x3x4x4xf32>) {
  %s = nn.matmul %q, %kt : (tensor<4x3x4x8xf32>, tensor<4x3x8x4xf32>) -> tensor<4x3x4x4xf32>
  %x5 = nn.reshape %s : (tensor<4x3x4x4xf32>) -> tensor<2x2x3x4x4xf32>
  %y5 = nn.add %x5, %mask : (tensor<2x2x3x4x4xf32>, tensor<1x2x1x4x4xf32>) -> tensor<2x2x3x4x4xf32>
  func.return %y5, %s : tensor<2x2x3x4x4xf32>, tensor<4x3x4x4xf32>
}
