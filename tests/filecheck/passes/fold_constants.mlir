// RUN: fusec %s --split-input-file -p fold-constants | filecheck %s
// RUN: fusec %s --split-input-file -p fold-constants --remarks 2>&1 >/dev/null | filecheck %s --check-prefix=REMARK
// RUN: fusec %s --split-input-file -p 'fold-constants{max-elements=0}' | filecheck %s --check-prefix=ZERO
// RUN: not fusec %s -p 'fold-constants{max-elements=-1}' 2>&1 | filecheck %s --check-prefix=BADOPT

// Ops that read only constants become constants; the ops reading runtime
// values stay and read the folded constants.

// The pass's own message, with the option as the command line spells it.
// BADOPT: error: pass 'fold-constants' option 'max-elements': max_elements must be 0 or more, got -1

// BatchNorm's per-channel algebra as decompose writes it: the whole chain
// folds into the two vectors the multiply-add reads, named as before; the
// constants it read are gone.
// REMARK: remark: folded nn.add (%var_eps) into a constant of 2 elements
// REMARK: remark: folded nn.rsqrt (%inv_std) into a constant of 2 elements
// REMARK: remark: folded nn.mul (%scale_eff) into a constant of 2 elements
// REMARK: remark: folded nn.mul (%mean_scaled) into a constant of 2 elements
// REMARK: remark: folded nn.sub (%bias_eff) into a constant of 2 elements
// REMARK: remark: folded 5 ops of @batch_norm into constants; erased 8 constants nothing reads any more
// CHECK-LABEL: func.func @batch_norm
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x2xf32>)
// CHECK-NEXT: %[[S:scale_eff]] = nn.constant dense<[0.5, 4.0]> : tensor<2xf32>
// CHECK-NEXT: %[[T:bias_eff]] = nn.constant dense<[-0.5, -7.0]> : tensor<2xf32>
// CHECK-NEXT: %[[M:.*]] = nn.mul %[[X]], %[[S]]
// CHECK-NEXT: %[[Y:.*]] = nn.add %[[M]], %[[T]]
// CHECK-NEXT: func.return %[[Y]]
// CHECK-NOT: nn.rsqrt
func.func @batch_norm(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %gamma = nn.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %beta = nn.constant dense<[0.0, 1.0]> : tensor<2xf32>
  %mean = nn.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %var = nn.constant dense<[4.0, 0.25]> : tensor<2xf32>
  %eps = nn.constant dense<0.0> : tensor<f32>
  %var_eps = nn.add %var, %eps : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %inv_std = nn.rsqrt %var_eps : tensor<2xf32>
  %scale_eff = nn.mul %gamma, %inv_std : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %mean_scaled = nn.mul %mean, %scale_eff : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %bias_eff = nn.sub %beta, %mean_scaled : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %m = nn.mul %x, %scale_eff : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  %y = nn.add %m, %bias_eff : (tensor<4x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
  func.return %y : tensor<4x2xf32>
}

// -----

// Reductions, matmuls and layout ops of constants fold too; integers keep
// their type, comparisons give i1. A function may return a folded constant.
// CHECK-LABEL: func.func @kinds
// CHECK-NEXT: %[[R:sum]] = nn.constant dense<[3, 7]> : tensor<2xi32>
// CHECK-NEXT: %[[P:prod]] = nn.constant dense<{{\[\[}}19.0, 22.0], [43.0, 50.0]]> : tensor<2x2xf32>
// CHECK-NEXT: %[[T:t]] = nn.constant dense<{{\[\[}}1.0, 3.0], [2.0, 4.0]]> : tensor<2x2xf32>
// CHECK-NEXT: %[[B:big]] = nn.constant dense<[false, true]> : tensor<2xi1>
// CHECK-NEXT: func.return %[[R]], %[[P]], %[[T]], %[[B]]
func.func @kinds() -> (tensor<2xi32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2xi1>) {
  %i = nn.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>
  %sum = nn.reduce_sum %i {axes = [1]} : (tensor<2x2xi32>) -> tensor<2xi32>
  %a = nn.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %b = nn.constant dense<[[5.0, 6.0], [7.0, 8.0]]> : tensor<2x2xf32>
  %prod = nn.matmul %a, %b : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %t = nn.transpose %a {perm = [1, 0]} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %five = nn.constant dense<5> : tensor<i32>
  %big = nn.cmp %sum, %five {predicate = "gt"} : (tensor<2xi32>, tensor<i32>) -> tensor<2xi1>
  func.return %sum, %prod, %t, %big : tensor<2xi32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2xi1>
}

// -----

// Left alone: a broadcast that would blow a scalar up past max_elements
// (65536 by default), an op with a fusion contract, a gather whose index is
// out of range (the interpreter refuses it), and an op reading an argument.
// A constant still read after the folds stays; unrelated dead code stays.
// REMARK: missed: nn.broadcast_to (%wide) not folded: its result holds 262144 elements, more than max_elements = 65536 and than its largest operand (1)
// REMARK: missed: nn.exp (%kept) not folded: it carries fusion = "never"
// REMARK: missed: nn.gather (%g) not folded: 'nn.gather': index 7 is out of range for axis 0 of size 2
// REMARK: remark: folded nn.neg (%n) into a constant of 1 element
// REMARK: remark: folded 1 op of @kept into constants{{$}}
// CHECK-LABEL: func.func @kept
// CHECK-SAME: (%[[X:[^:]*]]: tensor<f32>)
// CHECK-NEXT: %[[ONE:one]] = nn.constant dense<1.0> : tensor<f32>
// CHECK-NEXT: %[[WIDE:.*]] = nn.broadcast_to %[[ONE]]
// CHECK-NEXT: %[[KEPT:.*]] = nn.exp %[[ONE]] {fusion = "never"}
// CHECK-NEXT: %[[TABLE:.*]] = nn.constant
// CHECK-NEXT: %[[IDX:.*]] = nn.constant
// CHECK-NEXT: %[[G:.*]] = nn.gather %[[TABLE]], %[[IDX]]
// CHECK-NEXT: %[[N:n]] = nn.constant dense<-1.0> : tensor<f32>
// CHECK-NEXT: %[[DEAD:.*]] = nn.constant dense<3.0> : tensor<f32>
// CHECK-NEXT: %[[S:.*]] = nn.add %[[X]], %[[ONE]]
// CHECK-NEXT: func.return %[[WIDE]], %[[KEPT]], %[[G]], %[[N]], %[[S]]
// ZERO-LABEL: func.func @kept
// ZERO: nn.broadcast_to
// ZERO: nn.constant dense<-1.0> : tensor<f32>
func.func @kept(%x: tensor<f32>) -> (tensor<512x512xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %one = nn.constant dense<1.0> : tensor<f32>
  %wide = nn.broadcast_to %one : (tensor<f32>) -> tensor<512x512xf32>
  %kept = nn.exp %one {fusion = "never"} : tensor<f32>
  %table = nn.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %idx = nn.constant dense<7> : tensor<i64>
  %g = nn.gather %table, %idx {axis = 0} : (tensor<2xf32>, tensor<i64>) -> tensor<f32>
  %n = nn.neg %one : tensor<f32>
  %dead = nn.constant dense<3.0> : tensor<f32>
  %s = nn.add %x, %one : (tensor<f32>, tensor<f32>) -> tensor<f32>
  func.return %wide, %kept, %g, %n, %s : tensor<512x512xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

// A result no larger than its largest operand folds whatever its size: the
// transpose of a 300x300 weight replaces it (and the weight, now unread).
// CHECK-LABEL: func.func @transpose_weight
// CHECK-NEXT: %[[WT:wt]] = nn.constant dense<0.5> : tensor<300x300xf32>
// CHECK-NEXT: %[[Y:.*]] = nn.matmul %x, %[[WT]]
// CHECK-NOT: nn.transpose
// ZERO-LABEL: func.func @transpose_weight
// ZERO-NOT: nn.transpose
func.func @transpose_weight(%x: tensor<2x300xf32>) -> tensor<2x300xf32> {
  %w = nn.constant dense<0.5> : tensor<300x300xf32>
  %wt = nn.transpose %w {perm = [1, 0]} : (tensor<300x300xf32>) -> tensor<300x300xf32>
  %y = nn.matmul %x, %wt : (tensor<2x300xf32>, tensor<300x300xf32>) -> tensor<2x300xf32>
  func.return %y : tensor<2x300xf32>
}
