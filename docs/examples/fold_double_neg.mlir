// RUN: fusec %s --load-pass-plugin %S/fold_double_neg.py -p fold-double-neg | filecheck %s

// The pair disappears; the exp reads %x directly.
// CHECK-LABEL: func.func @pair
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32>)
// CHECK-NEXT: %[[E:.*]] = nn.exp %[[X]] : tensor<4xf32>
// CHECK-NEXT: func.return %[[E]]
// CHECK-NOT: nn.neg
func.func @pair(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = nn.neg %x : tensor<4xf32>
  %b = nn.neg %a : tensor<4xf32>
  %e = nn.exp %b : tensor<4xf32>
  func.return %e : tensor<4xf32>
}

// Four negations fold to none (the walker revisits what a rewrite exposes).
// CHECK-LABEL: func.func @four
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xi32>)
// CHECK-NEXT: func.return %[[X]] : tensor<4xi32>
func.func @four(%x: tensor<4xi32>) -> tensor<4xi32> {
  %a = nn.neg %x : tensor<4xi32>
  %b = nn.neg %a : tensor<4xi32>
  %c = nn.neg %b : tensor<4xi32>
  %d = nn.neg %c : tensor<4xi32>
  func.return %d : tensor<4xi32>
}

// An inner neg that something else still reads stays.
// CHECK-LABEL: func.func @odd_and_shared
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32>)
// CHECK-NEXT: %[[A:.*]] = nn.neg %[[X]] : tensor<4xf32>
// CHECK-NEXT: %[[S:.*]] = nn.add %[[X]], %[[A]]
// CHECK-NEXT: func.return %[[S]]
func.func @odd_and_shared(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = nn.neg %x : tensor<4xf32>
  %b = nn.neg %a : tensor<4xf32>
  %s = nn.add %b, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %s : tensor<4xf32>
}

// Unrelated dead code is not this pass's business: it stays.
// CHECK-LABEL: func.func @unrelated_dead
// CHECK-NEXT: nn.exp
// CHECK-NEXT: func.return
func.func @unrelated_dead(%x: tensor<4xf32>) -> tensor<4xf32> {
  %unused = nn.exp %x : tensor<4xf32>
  func.return %x : tensor<4xf32>
}
