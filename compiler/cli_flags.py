"""Which job a `fusec` command line asks for, and the flags that cannot apply
to it: every flag either takes effect or is an error naming it.

- The compile job is `-o OUT` where OUT does not end in `.mlir` (and no
  `--emit`); every other command line prints (or writes) the IR or the graph
  after the pipeline.
- The pipeline is `-p`'s, else the compile job's default, which `--no-fusion`,
  `--no-fold-constants`, `--target`, `--check-precision`, `--max-registers`,
  `--shared-memory-limit` and `--gemm` shape, in every job. Given with `-p`
  they would change nothing, so they are errors saying which pass option to
  write instead.
- `--ptx-info` and `--register-source` measure compiled kernels,
  `--save-kernels` keeps them, and `--autotune` (with `--autotune-top-k`,
  `--no-tuning-cache`) times them: compile job only.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.targets import unknown_target

if TYPE_CHECKING:  # imported when used: a compile the cache answers loads no compiler
    from fusec.compiler.autotune import AutotuneOptions
    from fusec.compiler.compile_pipeline import PipelineOptions
    from fusec.compiler.instrument import Instrumentation
    from fusec.compiler.pipeline import Insertion

# Flags that shape the default pipeline -> what to write in `-p` instead.
_DEFAULT_PIPELINE_FLAGS: dict[str, str] = {
    "no_fusion": "leave form-fusion-groups out of -p",
    "no_fold_constants": "leave fold-constants out of -p",
    "target": "give the passes their option, e.g. form-fusion-groups{target=NAME}",
    "check_precision": "add check-precision after form-fusion-groups in -p",
    "max_registers": "write register-budget{max-registers=N} in -p",
    "shared_memory_limit": "write tile-and-promote{shared-memory-limit=BYTES} in -p",
    "gemm": "write tile-and-promote{gemm=MODE} in -p",
    "no_library_epilogue": "write tile-and-promote{library-epilogue=false} in -p",
    "conv": "write tile-and-promote{conv=MODE} in -p",
    "attention": "write fuse-attention{backend=MODE} in -p",
    "conv_tf32": "write tile-and-promote{conv-tf32=true} in -p",
}
_COMPILE_ONLY_FLAGS = ("ptx_info", "register_source", "save_kernels", "autotune",
                       "autotune_top_k", "no_tuning_cache", "no_library_timing")


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _given(args: argparse.Namespace, dest: str) -> bool:
    value = getattr(args, dest)
    return value is not None and value is not False


def check_flags(args: argparse.Namespace) -> bool:
    """Whether the command line asks for the compile job; a flag that would be
    ignored is a `FusecError` naming it."""
    compile_job = args.output is not None and args.emit is None \
        and not args.output.endswith(".mlir")
    if args.target is not None and (problem := unknown_target(args.target)) is not None:
        raise FusecError(f"--target: {problem}")
    if args.passes is not None:
        for dest, instead in _DEFAULT_PIPELINE_FLAGS.items():
            if _given(args, dest):
                raise FusecError(f"{_flag(dest)} shapes the default pipeline, which -p "
                                 f"replaces; {instead}")
    if not compile_job:
        for dest in _COMPILE_ONLY_FLAGS:
            if _given(args, dest):
                raise FusecError(f"{_flag(dest)} acts on compiled kernels: it needs the "
                                 "compile job (-o OUT, a directory)")
    else:
        for dest in ("split_input_file", "verify_diagnostics"):
            if _given(args, dest):
                raise FusecError(f"{_flag(dest)} applies to printed IR, not to the compile "
                                 "job (-o OUT)")
    dumps = args.print_ir_after_all or args.print_ir_before or args.print_ir_after
    if args.print_op_generic and (compile_job or args.emit) and not dumps:
        raise FusecError("--print-op-generic applies to printed IR; this command prints none "
                         "(add --print-ir-after=NAME, or drop -o OUT / --emit)")
    return compile_job


def pipeline_options(args: argparse.Namespace) -> PipelineOptions:
    """The default pipeline's shape from the flags (their defaults where not given)."""
    from fusec.compiler.compile_pipeline import PipelineOptions, ScheduleOptions

    return PipelineOptions(
        fusion=not args.no_fusion,
        target=args.target or "auto",
        check_precision=args.check_precision,
        fold_constants=not args.no_fold_constants,
        schedule=ScheduleOptions(args.max_registers or 0, args.shared_memory_limit or 0,
                                 args.gemm or "auto",
                                 library_epilogue=not args.no_library_epilogue,
                                 conv=args.conv or "auto", conv_tf32=args.conv_tf32,
                                 attention=args.attention or "auto",
                                 library_timing=not args.no_library_timing,
                                 ptxas_wait=None if builds_kernels(args) else 0.0),
    )


def builds_kernels(args: argparse.Namespace) -> bool:
    """Whether the job builds its kernels after the front end (`--save-kernels`,
    `--ptx-info`, `--autotune`), so that register-budget's ptxas counts
    share those builds; otherwise it counts only kernels built before
    (the kernel cache) and waits for none: a build for a count alone
    would be most of a cold compile's time."""
    return bool(getattr(args, "save_kernels", False) or getattr(args, "ptx_info", False)
                or getattr(args, "autotune", False))


def autotune_options(args: argparse.Namespace) -> AutotuneOptions | None:
    """`--autotune` and its options; `--autotune-top-k` or `--no-tuning-cache`
    without it is an error."""
    if not args.autotune:
        for dest in ("autotune_top_k", "no_tuning_cache"):
            if _given(args, dest):
                raise FusecError(f"{_flag(dest)} applies to --autotune, which is not given")
        return None
    if args.autotune_top_k == 0:
        raise FusecError("--autotune-top-k: at least 1 candidate per group")
    from fusec.compiler.autotune import AutotuneOptions

    return AutotuneOptions(top_k=args.autotune_top_k or 4, cache=not args.no_tuning_cache,
                           quiet=args.quiet)


def insertions(args: argparse.Namespace) -> list[Insertion]:
    """`--insert-before` then `--insert-after`, each in the order given."""
    from fusec.compiler.pipeline import Insertion

    return [*(Insertion.parse("--insert-before", t) for t in args.insert_before),
            *(Insertion.parse("--insert-after", t) for t in args.insert_after)]


def _names(values: list[str]) -> frozenset[str]:
    return frozenset(n.strip() for v in values for n in v.split(",") if n.strip())


def instrumentation(args: argparse.Namespace) -> Instrumentation:
    """IR dumps and timing as the flags ask."""
    from fusec.compiler.instrument import Instrumentation, PassTimer

    return Instrumentation(
        print_before=_names(args.print_ir_before),
        print_after=_names(args.print_ir_after),
        print_after_all=args.print_ir_after_all,
        generic=args.print_op_generic,
        remarks_in_ir=args.remarks_in_ir,
        timer=PassTimer(enabled=args.mlir_timing),
    )
