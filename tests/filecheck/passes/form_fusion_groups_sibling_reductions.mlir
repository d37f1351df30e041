// RUN: fusec %s --split-input-file -p decompose,form-fusion-groups | filecheck %s
// RUN: fusec %s --split-input-file -p decompose,form-fusion-groups --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec %s --split-input-file -p 'decompose,form-fusion-groups{policy=vertical}' | filecheck %s --check-prefix=VERT

// Sibling reductions over one shape and the same reduced axes that read no
// common value become one reduction group with several outputs; the
// `vertical` policy (no horizontal fusion) leaves them apart.

// CHECK-LABEL: func.func @column_means
// CHECK: %a, %b = fusion.group (%x, %y) {name = "g0", kind = "reduction"}
// CHECK: nn.reduce_mean %x_1 {axes = [0]}
// CHECK: nn.reduce_mean %y_1 {axes = [0]}
// CHECK: fusion.yield
// REMARK: remark: fused nn.reduce_mean (%b) into group g0: saves 0 B and 1 launch (dT = {{.*}})
// VERT-LABEL: func.func @column_means
// VERT-NOT: fusion.group
// VERT: func.return
func.func @column_means(%x: tensor<64x8xf32>, %y: tensor<64x8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %a = nn.reduce_mean %x {axes = [0]} : (tensor<64x8xf32>) -> tensor<8xf32>
  %b = nn.reduce_mean %y {axes = [0]} : (tensor<64x8xf32>) -> tensor<8xf32>
  func.return %a, %b : tensor<8xf32>, tensor<8xf32>
}

// -----

// Other reduced axes of the same shape: two kernels, and one remark why.

// CHECK-LABEL: func.func @other_axes
// CHECK-NOT: fusion.group
// REMARK: missed: nn.reduce_sum (%c) not fused with nn.reduce_sum (%r): the reductions cannot share one iteration space: nn.reduce_sum (%c) reduces axes [0] of 64x8 but nn.reduce_sum (%r) reduces axes [1] of 64x8
// REMARK-NOT: missed: nn.reduce_sum (%c) not fused
func.func @other_axes(%x: tensor<64x8xf32>, %y: tensor<64x8xf32>) -> (tensor<64xf32>, tensor<8xf32>) {
  %r = nn.reduce_sum %x {axes = [1]} : (tensor<64x8xf32>) -> tensor<64xf32>
  %c = nn.reduce_sum %y {axes = [0]} : (tensor<64x8xf32>) -> tensor<8xf32>
  func.return %r, %c : tensor<64xf32>, tensor<8xf32>
}
