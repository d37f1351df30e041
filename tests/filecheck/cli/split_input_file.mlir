// RUN: fusec %s -p "" --split-input-file | filecheck %s --check-prefix=SPLIT
// RUN: fusec %s -p "" | filecheck %s --check-prefix=WHOLE

// With --split-input-file each `// -----` section is its own module and the
// modules print separated by `// -----` lines; without it the marker is only
// a comment and one module holds every function.

// SPLIT:      builtin.module {
// SPLIT-NEXT:   func.func @first
// SPLIT-NEXT:     func.return
// SPLIT-NEXT:   }
// SPLIT-NEXT: }
// SPLIT-NEXT: // -----
// SPLIT-NEXT: builtin.module {
// SPLIT-NEXT:   func.func @second
// SPLIT-NEXT:     nn.exp
// SPLIT-NEXT:     func.return
// SPLIT-NEXT:   }
// SPLIT-NEXT: }
// SPLIT-NEXT: // -----
// SPLIT-NEXT: builtin.module {
// SPLIT-NEXT:   func.func @third
// SPLIT-NOT:  // -----

// WHOLE:      builtin.module {
// WHOLE-NEXT:   func.func @first
// WHOLE:        func.func @second
// WHOLE:        func.func @third
// WHOLE-NOT:  // -----
// WHOLE-NOT:  builtin.module

func.func @first(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}

// -----

func.func @second(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

func.func @third(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.neg %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
