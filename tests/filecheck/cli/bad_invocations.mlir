// A bad pipeline is one `error:` line and exit code 1. (tests/test_cli.py
// covers every other bad invocation in-process, which is much faster.)

// RUN: not fusec %s -p decompos 2>&1 | filecheck %s --check-prefix=SUGGEST
// SUGGEST: error: unknown pass 'decompos'; did you mean 'decompose'?

// RUN: not fusec %s --load-pass-plugin %inputs/cli_passes.py -p 'cli-noop{colour=red}' 2>&1 | filecheck %s --check-prefix=OPTION
// OPTION: error: pass 'cli-noop' has no option 'colour' (its options: count, verbose)

// RUN: not fusec %s -p 'decompose{' 2>&1 | filecheck %s --check-prefix=MALFORMED
// MALFORMED: error: invalid pass pipeline 'decompose{': expected argument name here

// A crashing pass is an internal error: one line, the traceback only on request.
// RUN: not fusec %s --load-pass-plugin %inputs/cli_passes.py -p cli-crash 2>&1 | filecheck %s --check-prefix=CRASH
// CRASH-NOT: Traceback
// CRASH: fusec: internal error in pass 'cli-crash': RuntimeError: cli-crash always fails (rerun with --traceback for details)
// CRASH-NOT: Traceback

func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
