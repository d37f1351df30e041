// RUN: fusec %s --split-input-file -p decompose | filecheck %s --enable-var-scope
// RUN: fusec %s --split-input-file -p 'decompose{ops=softmax}' | filecheck %s --check-prefix=ONLY
// RUN: fusec %s --split-input-file -p decompose --print-ir-after-all 2> %t.dump > /dev/null
// RUN: filecheck %s --input-file %t.dump --check-prefix=DUMP
// RUN: not fusec %s -p 'decompose{ops=soft}' 2>&1 | filecheck %s --check-prefix=BADOPT

// Each composite becomes primitives; the captures prove which value feeds
// which, the CHECK-NOTs that the composite is gone.

// BADOPT: error: pass 'decompose' option 'ops': unknown composite 'soft' in 'ops'

// CHECK-LABEL: func.func @softmax_last_axis
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf32>)
// CHECK-NOT: nn.softmax
// CHECK: %[[MAX:.*]] = nn.reduce_max %[[X]] {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[SHIFTED:.*]] = nn.sub %[[X]], %[[MAX]] : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[EXP:.*]] = nn.exp %[[SHIFTED]] : tensor<4x8xf32>
// CHECK-NEXT: %[[SUM:.*]] = nn.reduce_sum %[[EXP]] {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[Y:.*]] = nn.div %[[EXP]], %[[SUM]] : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[R:.*]] = nn.relu %[[Y]] : tensor<4x8xf32>
// CHECK-NEXT: func.return %[[R]] : tensor<4x8xf32>

// ONLY-LABEL: func.func @softmax_last_axis
// ONLY-NOT: nn.softmax
// ONLY: nn.reduce_max

// Names stay readable: the intermediates are named after the composite's result.
// DUMP: // -----// IR Dump After decompose //----- //
// DUMP-LABEL: func.func @softmax_last_axis
// DUMP-NEXT: %y_max = nn.reduce_max %x {axes = [1], keepdims = true}
// DUMP-NEXT: %y_shifted = nn.sub %x, %y_max
// DUMP-NEXT: %y_exp = nn.exp %y_shifted
// DUMP-NEXT: %y_sum = nn.reduce_sum %y_exp
// DUMP-NEXT: %y = nn.div %y_exp, %y_sum
// DUMP-NEXT: %r = nn.relu %y
// DUMP-NEXT: func.return %r
func.func @softmax_last_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = nn.softmax %x {axis = -1} : tensor<4x8xf32>
  %r = nn.relu %y : tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// -----

// The axis is normalized; the reductions run over axis 0 of a 3-D tensor.
// CHECK-LABEL: func.func @softmax_axis0
// CHECK-SAME: (%[[X:[^:]*]]: tensor<3x4x8xf32>)
// CHECK-NOT: nn.softmax
// CHECK: %[[MAX:.*]] = nn.reduce_max %[[X]] {axes = [0], keepdims = true} : (tensor<3x4x8xf32>) -> tensor<1x4x8xf32>
// CHECK-NEXT: %[[SHIFTED:.*]] = nn.sub %[[X]], %[[MAX]]
// CHECK-NEXT: %[[EXP:.*]] = nn.exp %[[SHIFTED]]
// CHECK-NEXT: %[[SUM:.*]] = nn.reduce_sum %[[EXP]] {axes = [0], keepdims = true} : (tensor<3x4x8xf32>) -> tensor<1x4x8xf32>
// CHECK-NEXT: %[[Y:.*]] = nn.div %[[EXP]], %[[SUM]]
// CHECK-NEXT: func.return %[[Y]]

// ONLY-LABEL: func.func @softmax_axis0
// ONLY-NOT: nn.softmax
func.func @softmax_axis0(%x: tensor<3x4x8xf32>) -> tensor<3x4x8xf32> {
  %y = nn.softmax %x {axis = -3} : tensor<3x4x8xf32>
  func.return %y : tensor<3x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @log_softmax
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf32>)
// CHECK-NOT: nn.log_softmax
// CHECK: %[[MAX:.*]] = nn.reduce_max %[[X]] {axes = [1], keepdims = true}
// CHECK-NEXT: %[[SHIFTED:.*]] = nn.sub %[[X]], %[[MAX]]
// CHECK-NEXT: %[[EXP:.*]] = nn.exp %[[SHIFTED]]
// CHECK-NEXT: %[[SUM:.*]] = nn.reduce_sum %[[EXP]] {axes = [1], keepdims = true}
// CHECK-NEXT: %[[LOG:.*]] = nn.log %[[SUM]] : tensor<4x1xf32>
// CHECK-NEXT: %[[Y:.*]] = nn.sub %[[SHIFTED]], %[[LOG]] : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: func.return %[[Y]]

// With ops=softmax, the other composites stay.
// ONLY-LABEL: func.func @log_softmax
// ONLY: nn.log_softmax
func.func @log_softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.log_softmax %x : tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @layer_norm_last_axis
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf32>, %[[G:[^:]*]]: tensor<8xf32>, %[[B:[^:]*]]: tensor<8xf32>)
// CHECK-NOT: nn.layer_norm
// CHECK: %[[MEAN:.*]] = nn.reduce_mean %[[X]] {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[C:.*]] = nn.sub %[[X]], %[[MEAN]]
// CHECK-NEXT: %[[SQ:.*]] = nn.mul %[[C]], %[[C]]
// CHECK-NEXT: %[[VAR:.*]] = nn.reduce_mean %[[SQ]] {axes = [1], keepdims = true}
// CHECK-NEXT: %[[EPS:.*]] = nn.constant dense<1.0e-05> : tensor<f32>
// CHECK-NEXT: %[[VE:.*]] = nn.add %[[VAR]], %[[EPS]] : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[INV:.*]] = nn.rsqrt %[[VE]] : tensor<4x1xf32>
// CHECK-NEXT: %[[N:.*]] = nn.mul %[[C]], %[[INV]]
// CHECK-NEXT: %[[S:.*]] = nn.mul %[[N]], %[[G]] : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[Y:.*]] = nn.add %[[S]], %[[B]] : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: func.return %[[Y]]
func.func @layer_norm_last_axis(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %y = nn.layer_norm %x, %g, %b {axis = -1, epsilon = 1.0e-05} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// -----

// Over the last two dimensions: both reductions name axes 1 and 2, and the
// 4x8 scale and bias broadcast against 2x4x8 without a reshape.
// CHECK-LABEL: func.func @layer_norm_last_two
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x4x8xf32>, %[[G:[^:]*]]: tensor<4x8xf32>, %[[B:[^:]*]]: tensor<4x8xf32>)
// CHECK-NOT: nn.layer_norm
// CHECK: %[[MEAN:.*]] = nn.reduce_mean %[[X]] {axes = [1, 2], keepdims = true} : (tensor<2x4x8xf32>) -> tensor<2x1x1xf32>
// CHECK-NEXT: %[[C:.*]] = nn.sub %[[X]], %[[MEAN]]
// CHECK-NEXT: %[[SQ:.*]] = nn.mul %[[C]], %[[C]]
// CHECK-NEXT: %[[VAR:.*]] = nn.reduce_mean %[[SQ]] {axes = [1, 2], keepdims = true}
// CHECK-NEXT: %[[EPS:.*]] = nn.constant dense<0.001> : tensor<f32>
// CHECK-NEXT: %[[VE:.*]] = nn.add %[[VAR]], %[[EPS]]
// CHECK-NEXT: %[[INV:.*]] = nn.rsqrt %[[VE]]
// CHECK-NEXT: %[[N:.*]] = nn.mul %[[C]], %[[INV]]
// CHECK-NEXT: %[[S:.*]] = nn.mul %[[N]], %[[G]] : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[Y:.*]] = nn.add %[[S]], %[[B]]
// CHECK-NEXT: func.return %[[Y]]
func.func @layer_norm_last_two(%x: tensor<2x4x8xf32>, %g: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<2x4x8xf32> {
  %y = nn.layer_norm %x, %g, %b {axis = 1, epsilon = 1.0e-03} : (tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  func.return %y : tensor<2x4x8xf32>
}

// -----

// The epsilon constant takes the input's element type; the default is 1e-6.
// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf16>, %[[G:[^:]*]]: tensor<8xf16>)
// CHECK-NOT: nn.rms_norm
// CHECK: %[[SQ:.*]] = nn.mul %[[X]], %[[X]]
// CHECK-NEXT: %[[MS:.*]] = nn.reduce_mean %[[SQ]] {axes = [1], keepdims = true} : (tensor<4x8xf16>) -> tensor<4x1xf16>
// CHECK-NEXT: %[[EPS:.*]] = nn.constant dense<{{.*}}> : tensor<f16>
// CHECK-NEXT: %[[ME:.*]] = nn.add %[[MS]], %[[EPS]]
// CHECK-NEXT: %[[INV:.*]] = nn.rsqrt %[[ME]]
// CHECK-NEXT: %[[N:.*]] = nn.mul %[[X]], %[[INV]]
// CHECK-NEXT: %[[Y:.*]] = nn.mul %[[N]], %[[G]]
// CHECK-NEXT: func.return %[[Y]]
func.func @rms_norm(%x: tensor<4x8xf16>, %g: tensor<8xf16>) -> tensor<4x8xf16> {
  %y = nn.rms_norm %x, %g : (tensor<4x8xf16>, tensor<8xf16>) -> tensor<4x8xf16>
  func.return %y : tensor<4x8xf16>
}

// -----

// The per-channel part folds on the [C] vectors, then one multiply-add per
// element with the vectors reshaped to [C, 1, 1].
// CHECK-LABEL: func.func @batch_norm_nc
// CHECK-SAME: (%[[X:[^:]*]]: tensor<5x3xf32>, %[[S:[^:]*]]: tensor<3xf32>, %[[B:[^:]*]]: tensor<3xf32>, %[[M:[^:]*]]: tensor<3xf32>, %[[V:[^:]*]]: tensor<3xf32>)
// CHECK: %[[EPS:.*]] = nn.constant dense<0.001> : tensor<f32>
// CHECK-NEXT: %[[VE:.*]] = nn.add %[[V]], %[[EPS]]
// CHECK-NEXT: %[[INV:.*]] = nn.rsqrt %[[VE]]
// CHECK-NEXT: %[[SE:.*]] = nn.mul %[[S]], %[[INV]]
// CHECK-NEXT: %[[MS:.*]] = nn.mul %[[M]], %[[SE]]
// CHECK-NEXT: %[[BE:.*]] = nn.sub %[[B]], %[[MS]]
// CHECK-NEXT: %[[XS:.*]] = nn.mul %[[X]], %[[SE]] : (tensor<5x3xf32>, tensor<3xf32>) -> tensor<5x3xf32>
// CHECK-NEXT: %[[Y:.*]] = nn.add %[[XS]], %[[BE]] : (tensor<5x3xf32>, tensor<3xf32>) -> tensor<5x3xf32>
// CHECK-NEXT: func.return %[[Y]]
func.func @batch_norm_nc(%x: tensor<5x3xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>) -> tensor<5x3xf32> {
  %y = nn.batch_norm %x, %s, %b, %m, %v {epsilon = 1.0e-03} : (tensor<5x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<5x3xf32>
  func.return %y : tensor<5x3xf32>
}

// -----

// A composite with a fusion contract stays whole (the contract names the op
// as one unit); dead ops are kept (removing them is not decompose's call);
// composites inside a fusion.group body are expanded in place.
// CHECK-LABEL: func.func @contract_dead_and_group
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf32>)
// CHECK: %[[KEPT:.*]] = nn.softmax %[[X]] {axis = -1, fusion = "never"} : tensor<4x8xf32>
// CHECK-NEXT: %[[DEAD:.*]] = nn.exp %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: %[[G:.*]] = fusion.group (%[[KEPT]])
// CHECK-NEXT: ^{{.*}}(%[[A:.*]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[MAX:.*]] = nn.reduce_max %[[A]] {axes = [1], keepdims = true}
// CHECK-NOT: nn.softmax
// CHECK: fusion.yield
// CHECK: func.return %[[G]]
func.func @contract_dead_and_group(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %k = nn.softmax %x {axis = -1, fusion = "never"} : tensor<4x8xf32>
  %dead = nn.exp %x : tensor<4x8xf32>
  %g = fusion.group (%k) {kind = "reduction"} : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %s = nn.softmax %a : tensor<4x8xf32>
    fusion.yield %s : tensor<4x8xf32>
  }
  func.return %g : tensor<4x8xf32>
}
