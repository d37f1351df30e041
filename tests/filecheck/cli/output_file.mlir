// RUN: rm -rf %t && mkdir -p %t
// RUN: fusec %s -p "" --split-input-file -o %t/out.mlir
// RUN: filecheck %s --input-file %t/out.mlir
// RUN: fusec %t/out.mlir -p "" --split-input-file | filecheck %s

// -o FILE writes the IR there, and what it writes reads back.

// CHECK-LABEL: func.func @f
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4xf32>)
// CHECK-NEXT: %[[E:.*]] = nn.exp %[[X]] : tensor<4xf32>
// CHECK-NEXT: func.return %[[E]] : tensor<4xf32>
// CHECK: // -----
// CHECK-LABEL: func.func @g

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @g(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
