// RUN: fusec %s -p "" --split-input-file | filecheck %s --enable-var-scope
// RUN: fusec %s -p "" --split-input-file --print-op-generic | fusec - -p "" --split-input-file | filecheck %s --enable-var-scope

// Elementwise ops print and parse back unchanged, directly and through the
// generic form. The short `: T` form is used exactly when the single operand
// and the result share one type; default attributes stay omitted.

// CHECK-LABEL: func.func @unary_chain
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf32>)
func.func @unary_chain(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: %[[NEG:.*]] = nn.neg %[[X]] : tensor<4x8xf32>
  // CHECK-NEXT: %[[ABS:.*]] = nn.abs %[[NEG]] : tensor<4x8xf32>
  // CHECK-NEXT: %[[EXP:.*]] = nn.exp %[[ABS]] : tensor<4x8xf32>
  // CHECK-NEXT: %[[LOG:.*]] = nn.log %[[EXP]] : tensor<4x8xf32>
  // CHECK-NEXT: %[[SQRT:.*]] = nn.sqrt %[[LOG]] : tensor<4x8xf32>
  // CHECK-NEXT: %[[RSQRT:.*]] = nn.rsqrt %[[SQRT]] : tensor<4x8xf32>
  // CHECK-NEXT: %[[RECIP:.*]] = nn.reciprocal %[[RSQRT]] : tensor<4x8xf32>
  // CHECK-NEXT: %[[TANH:.*]] = nn.tanh %[[RECIP]] : tensor<4x8xf32>
  // CHECK-NEXT: %[[ERF:.*]] = nn.erf %[[TANH]] : tensor<4x8xf32>
  // CHECK-NEXT: %[[SIN:.*]] = nn.sin %[[ERF]] : tensor<4x8xf32>
  // CHECK-NEXT: %[[COS:.*]] = nn.cos %[[SIN]] : tensor<4x8xf32>
  // CHECK-NEXT: %[[SIG:.*]] = nn.sigmoid %[[COS]] : tensor<4x8xf32>
  // CHECK-NEXT: %[[RELU:.*]] = nn.relu %[[SIG]] : tensor<4x8xf32>
  // CHECK-NEXT: %[[SILU:.*]] = nn.silu %[[RELU]] : tensor<4x8xf32>
  // CHECK-NEXT: func.return %[[SILU]] : tensor<4x8xf32>
  %0 = nn.neg %x : tensor<4x8xf32>
  %1 = nn.abs %0 : tensor<4x8xf32>
  %2 = nn.exp %1 : tensor<4x8xf32>
  %3 = nn.log %2 : tensor<4x8xf32>
  %4 = nn.sqrt %3 : tensor<4x8xf32>
  %5 = nn.rsqrt %4 : tensor<4x8xf32>
  %6 = nn.reciprocal %5 : tensor<4x8xf32>
  %7 = nn.tanh %6 : tensor<4x8xf32>
  %8 = nn.erf %7 : tensor<4x8xf32>
  %s = nn.sin %8 : tensor<4x8xf32>
  %c = nn.cos %s : tensor<4x8xf32>
  %9 = nn.sigmoid %c : tensor<4x8xf32>
  %10 = nn.relu %9 : tensor<4x8xf32>
  %11 = nn.silu %10 : tensor<4x8xf32>
  func.return %11 : tensor<4x8xf32>
}

// -----

// f16, bf16 and f64 work like f32; neg, abs and relu also take integers.

// CHECK-LABEL: func.func @unary_types
// CHECK-SAME: (%[[H:[^:]*]]: tensor<8xf16>, %[[B:[^:]*]]: tensor<8xbf16>, %[[D:[^:]*]]: tensor<8xf64>, %[[I:[^:]*]]: tensor<8xi32>, %[[L:[^:]*]]: tensor<8xi64>)
func.func @unary_types(%h: tensor<8xf16>, %b: tensor<8xbf16>, %d: tensor<8xf64>, %i: tensor<8xi32>, %l: tensor<8xi64>) -> (tensor<8xf16>, tensor<8xbf16>, tensor<8xf64>, tensor<8xi32>, tensor<8xi64>, tensor<8xi32>) {
  // CHECK-NEXT: %[[EH:.*]] = nn.exp %[[H]] : tensor<8xf16>
  // CHECK-NEXT: %[[TB:.*]] = nn.tanh %[[B]] : tensor<8xbf16>
  // CHECK-NEXT: %[[SD:.*]] = nn.sqrt %[[D]] : tensor<8xf64>
  // CHECK-NEXT: %[[NI:.*]] = nn.neg %[[I]] : tensor<8xi32>
  // CHECK-NEXT: %[[AL:.*]] = nn.abs %[[L]] : tensor<8xi64>
  // CHECK-NEXT: %[[RI:.*]] = nn.relu %[[NI]] : tensor<8xi32>
  // CHECK-NEXT: func.return %[[EH]], %[[TB]], %[[SD]], %[[NI]], %[[AL]], %[[RI]]
  %0 = nn.exp %h : tensor<8xf16>
  %1 = nn.tanh %b : tensor<8xbf16>
  %2 = nn.sqrt %d : tensor<8xf64>
  %3 = nn.neg %i : tensor<8xi32>
  %4 = nn.abs %l : tensor<8xi64>
  %5 = nn.relu %3 : tensor<8xi32>
  func.return %0, %1, %2, %3, %4, %5 : tensor<8xf16>, tensor<8xbf16>, tensor<8xf64>, tensor<8xi32>, tensor<8xi64>, tensor<8xi32>
}

// -----

// The unary ops also accept the functional type form; they print back short.

// CHECK-LABEL: func.func @functional_type_form
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32>)
func.func @functional_type_form(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK-NEXT: %[[E:.*]] = nn.exp %[[X]] : tensor<4xf32>
  // CHECK-NEXT: func.return %[[E]]
  %0 = nn.exp %x : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// gelu: the default approximation ("none") stays omitted; an explicit one is kept.

// CHECK-LABEL: func.func @gelu
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x3xf32>)
func.func @gelu(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  // CHECK-NEXT: %[[G0:.*]] = nn.gelu %[[X]] : tensor<2x3xf32>
  // CHECK-NEXT: %[[G1:.*]] = nn.gelu %[[G0]] {approximate = "none"} : tensor<2x3xf32>
  // CHECK-NEXT: %[[G2:.*]] = nn.gelu %[[G1]] {approximate = "tanh"} : tensor<2x3xf32>
  // CHECK-NEXT: func.return %[[G0]], %[[G1]], %[[G2]]
  %0 = nn.gelu %x : tensor<2x3xf32>
  %1 = nn.gelu %0 {approximate = "none"} : tensor<2x3xf32>
  %2 = nn.gelu %1 {approximate = "tanh"} : tensor<2x3xf32>
  func.return %0, %1, %2 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// clamp: both bounds, one bound, typed and bare floats, negative values,
// integers for integer tensors.

// CHECK-LABEL: func.func @clamp
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32>, %[[I:[^:]*]]: tensor<4xi32>)
func.func @clamp(%x: tensor<4xf32>, %i: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>) {
  // CHECK-NEXT: %[[C0:.*]] = nn.clamp %[[X]] {min = 0.0, max = 6.0} : tensor<4xf32>
  // CHECK-NEXT: %[[C1:.*]] = nn.clamp %[[C0]] {min = -1.5} : tensor<4xf32>
  // CHECK-NEXT: %[[C2:.*]] = nn.clamp %[[C1]] {max = 0.1 : f32} : tensor<4xf32>
  // CHECK-NEXT: %[[C3:.*]] = nn.clamp %[[C2]] {min = -2.5e-07 : f32, max = 3.0e+38 : f32} : tensor<4xf32>
  // CHECK-NEXT: %[[C4:.*]] = nn.clamp %[[C3]] : tensor<4xf32>
  // CHECK-NEXT: %[[CI:.*]] = nn.clamp %[[I]] {min = -3, max = 3} : tensor<4xi32>
  // CHECK-NEXT: func.return %[[C4]], %[[CI]]
  %0 = nn.clamp %x {min = 0.0, max = 6.0} : tensor<4xf32>
  %1 = nn.clamp %0 {min = -1.5} : tensor<4xf32>
  %2 = nn.clamp %1 {max = 0.1 : f32} : tensor<4xf32>
  %3 = nn.clamp %2 {min = -2.5e-07 : f32, max = 3.0e+38 : f32} : tensor<4xf32>
  %4 = nn.clamp %3 : tensor<4xf32>
  %5 = nn.clamp %i {min = -3, max = 3} : tensor<4xi32>
  func.return %4, %5 : tensor<4xf32>, tensor<4xi32>
}

// -----

// Binary ops broadcast NumPy-style: trailing dimensions align, 1 stretches,
// a rank-0 tensor is a scalar.

// CHECK-LABEL: func.func @binary_broadcast
// CHECK-SAME: (%[[A:[^:]*]]: tensor<4x8xf32>, %[[ROW:[^:]*]]: tensor<8xf32>, %[[COL:[^:]*]]: tensor<4x1xf32>, %[[S:[^:]*]]: tensor<f32>)
func.func @binary_broadcast(%a: tensor<4x8xf32>, %row: tensor<8xf32>, %col: tensor<4x1xf32>, %s: tensor<f32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: %[[ADD:.*]] = nn.add %[[A]], %[[ROW]] : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %[[SUB:.*]] = nn.sub %[[COL]], %[[ADD]] : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %[[MUL:.*]] = nn.mul %[[SUB]], %[[S]] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %[[DIV:.*]] = nn.div %[[S]], %[[MUL]] : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %[[MAX:.*]] = nn.max %[[DIV]], %[[COL]] : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %[[MIN:.*]] = nn.min %[[MAX]], %[[A]] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %[[POW:.*]] = nn.pow %[[MIN]], %[[ROW]] : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %[[OUTER:.*]] = nn.add %[[COL]], %[[ROW]] : (tensor<4x1xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %[[SUM:.*]] = nn.add %[[POW]], %[[OUTER]] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: func.return %[[SUM]] : tensor<4x8xf32>
  %0 = nn.add %a, %row : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = nn.sub %col, %0 : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = nn.mul %1, %s : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %3 = nn.div %s, %2 : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = nn.max %3, %col : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %5 = nn.min %4, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %6 = nn.pow %5, %row : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %7 = nn.add %col, %row : (tensor<4x1xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %8 = nn.add %6, %7 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %8 : tensor<4x8xf32>
}

// -----

// add, sub, mul, max and min also take integer tensors.

// CHECK-LABEL: func.func @binary_integers
// CHECK-SAME: (%[[A:[^:]*]]: tensor<2x3xi64>, %[[B:[^:]*]]: tensor<3xi64>, %[[C:[^:]*]]: tensor<i32>)
func.func @binary_integers(%a: tensor<2x3xi64>, %b: tensor<3xi64>, %c: tensor<i32>) -> (tensor<2x3xi64>, tensor<i32>) {
  // CHECK-NEXT: %[[ADD:.*]] = nn.add %[[A]], %[[B]] : (tensor<2x3xi64>, tensor<3xi64>) -> tensor<2x3xi64>
  // CHECK-NEXT: %[[MUL:.*]] = nn.mul %[[ADD]], %[[B]] : (tensor<2x3xi64>, tensor<3xi64>) -> tensor<2x3xi64>
  // CHECK-NEXT: %[[MAX:.*]] = nn.max %[[MUL]], %[[A]] : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi64>
  // CHECK-NEXT: %[[SUB:.*]] = nn.sub %[[C]], %[[C]] : (tensor<i32>, tensor<i32>) -> tensor<i32>
  // CHECK-NEXT: %[[MIN:.*]] = nn.min %[[SUB]], %[[C]] : (tensor<i32>, tensor<i32>) -> tensor<i32>
  // CHECK-NEXT: func.return %[[MAX]], %[[MIN]]
  %0 = nn.add %a, %b : (tensor<2x3xi64>, tensor<3xi64>) -> tensor<2x3xi64>
  %1 = nn.mul %0, %b : (tensor<2x3xi64>, tensor<3xi64>) -> tensor<2x3xi64>
  %2 = nn.max %1, %a : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi64>
  %3 = nn.sub %c, %c : (tensor<i32>, tensor<i32>) -> tensor<i32>
  %4 = nn.min %3, %c : (tensor<i32>, tensor<i32>) -> tensor<i32>
  func.return %2, %4 : tensor<2x3xi64>, tensor<i32>
}

// -----

// cmp: every predicate, the i1 mask broadcasting like any binary op; select
// broadcasts its three operands together.

// CHECK-LABEL: func.func @cmp_select
// CHECK-SAME: (%[[A:[^:]*]]: tensor<4x8xf32>, %[[B:[^:]*]]: tensor<8xf32>, %[[I:[^:]*]]: tensor<4xi64>)
func.func @cmp_select(%a: tensor<4x8xf32>, %b: tensor<8xf32>, %i: tensor<4xi64>) -> (tensor<4x8xf32>, tensor<4xi1>) {
  // CHECK-NEXT: %[[LT:.*]] = nn.cmp %[[A]], %[[B]] {predicate = "lt"} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  // CHECK-NEXT: %[[LE:.*]] = nn.cmp %[[A]], %[[B]] {predicate = "le"} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  // CHECK-NEXT: %[[GT:.*]] = nn.cmp %[[B]], %[[A]] {predicate = "gt"} : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  // CHECK-NEXT: %[[GE:.*]] = nn.cmp %[[A]], %[[A]] {predicate = "ge"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  // CHECK-NEXT: %[[EQ:.*]] = nn.cmp %[[I]], %[[I]] {predicate = "eq"} : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi1>
  // CHECK-NEXT: %[[NE:.*]] = nn.cmp %[[I]], %[[I]] {predicate = "ne"} : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi1>
  // CHECK-NEXT: %[[SEL:.*]] = nn.select %[[LT]], %[[A]], %[[B]] : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %[[SEL2:.*]] = nn.select %[[GE]], %[[SEL]], %[[A]] : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK-NEXT: %[[MASK:.*]] = nn.select %[[EQ]], %[[NE]], %[[EQ]] : (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  // CHECK-NEXT: func.return %[[SEL2]], %[[MASK]]
  %lt = nn.cmp %a, %b {predicate = "lt"} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  %le = nn.cmp %a, %b {predicate = "le"} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  %gt = nn.cmp %b, %a {predicate = "gt"} : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  %ge = nn.cmp %a, %a {predicate = "ge"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  %eq = nn.cmp %i, %i {predicate = "eq"} : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi1>
  %ne = nn.cmp %i, %i {predicate = "ne"} : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi1>
  %s = nn.select %lt, %a, %b : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %s2 = nn.select %ge, %s, %a : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m = nn.select %eq, %ne, %eq : (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  func.return %s2, %m : tensor<4x8xf32>, tensor<4xi1>
}

// -----

// cast converts element types in every direction, shape unchanged.

// CHECK-LABEL: func.func @cast
// CHECK-SAME: (%[[X:[^:]*]]: tensor<2x4xf32>, %[[M:[^:]*]]: tensor<2x4xi1>)
func.func @cast(%x: tensor<2x4xf32>, %m: tensor<2x4xi1>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  // CHECK-NEXT: %[[H:.*]] = nn.cast %[[X]] : (tensor<2x4xf32>) -> tensor<2x4xf16>
  // CHECK-NEXT: %[[B:.*]] = nn.cast %[[H]] : (tensor<2x4xf16>) -> tensor<2x4xbf16>
  // CHECK-NEXT: %[[I:.*]] = nn.cast %[[B]] : (tensor<2x4xbf16>) -> tensor<2x4xi32>
  // CHECK-NEXT: %[[F:.*]] = nn.cast %[[I]] : (tensor<2x4xi32>) -> tensor<2x4xf32>
  // CHECK-NEXT: %[[MF:.*]] = nn.cast %[[M]] : (tensor<2x4xi1>) -> tensor<2x4xf32>
  // CHECK-NEXT: %[[SAME:.*]] = nn.cast %[[F]] : (tensor<2x4xf32>) -> tensor<2x4xf32>
  // CHECK-NEXT: func.return %[[SAME]], %[[MF]]
  %h = nn.cast %x : (tensor<2x4xf32>) -> tensor<2x4xf16>
  %b = nn.cast %h : (tensor<2x4xf16>) -> tensor<2x4xbf16>
  %i = nn.cast %b : (tensor<2x4xbf16>) -> tensor<2x4xi32>
  %f = nn.cast %i : (tensor<2x4xi32>) -> tensor<2x4xf32>
  %mf = nn.cast %m : (tensor<2x4xi1>) -> tensor<2x4xf32>
  %same = nn.cast %f : (tensor<2x4xf32>) -> tensor<2x4xf32>
  func.return %same, %mf : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// The fusion contract is an ordinary attribute beside the op's own ones;
// dotted names are annotations (as passes attach them) and are kept as is.

// CHECK-LABEL: func.func @fusion_contract
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32>)
func.func @fusion_contract(%x: tensor<4xf32>) -> tensor<4xf32> {
  // CHECK-NEXT: %[[E:.*]] = nn.exp %[[X]] {fusion = "never"} : tensor<4xf32>
  // CHECK-NEXT: %[[G:.*]] = nn.gelu %[[E]] {approximate = "tanh", fusion = "must", note.origin = "onnx"} : tensor<4xf32>
  // CHECK-NEXT: func.return %[[G]]
  %0 = nn.exp %x {fusion = "never"} : tensor<4xf32>
  %1 = nn.gelu %0 {approximate = "tanh", fusion = "must", note.origin = "onnx"} : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}
