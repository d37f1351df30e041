// RUN: fusec %s --load-pass-plugin %inputs/cli_passes.py -p 'cli-noop,cli-noop{count=2 verbose=true}' --print-ir-after-all 2>&1 >/dev/null | filecheck %s --check-prefix=DUMP
// RUN: fusec %s --load-pass-plugin %inputs/cli_passes.py -p cli-noop --print-ir-after-all 2>/dev/null | filecheck %s --check-prefix=STDOUT

// --print-ir-after-all writes the IR to stderr after every pass, each dump
// under a header naming the pass; stdout still gets the final IR once.

// DUMP:      // -----// IR Dump After cli-noop //----- //
// DUMP-NEXT: builtin.module {
// DUMP-NEXT:   func.func @f(%[[X:[^:]*]]: tensor<4xf32>) -> tensor<4xf32> {
// DUMP-NEXT:     %[[E:.*]] = nn.exp %[[X]] : tensor<4xf32>
// DUMP-NEXT:     func.return %[[E]] : tensor<4xf32>
// DUMP-NEXT:   }
// DUMP-NEXT: }
// DUMP-NEXT: // -----// IR Dump After cli-noop //----- //
// DUMP-NEXT: builtin.module {
// DUMP-NOT:  IR Dump After

// STDOUT:     builtin.module {
// STDOUT-NOT: IR Dump After

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
