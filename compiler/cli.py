"""The `fusec` command line.

```
fusec MODEL.mlir -p decompose            # run passes, print the IR (like xdsl-opt)
fusec MODEL.mlir                         # run the default pipeline, print the IR
fusec MODEL.mlir -o OUT                  # compile: OUT/model.mlir, kernels.py, plan.json, ...
fusec MODEL.mlir -o OUT -p 'decompose,my-pass,form-fusion-groups,group-each-op'  # own pipeline
fusec MODEL.mlir -o OUT --insert-after decompose=my-pass   # one pass added to the default
fusec MODEL.mlir -o OUT --mlir-timing --print-ir-after=form-fusion-groups
fusec MODEL.mlir -o OUT --check-precision   # + split fused groups that drift from unfused
fusec MODEL.mlir -o OUT --ptx-info          # + real registers and spills (GPU, else ptxas)
fusec MODEL.mlir -o OUT --save-kernels      # + PTX of every kernel in OUT/kernels (no JIT later)
fusec run MODEL.mlir|OUT --check         # run the kernels, compare with the reference
fusec run OUT --registers                # + each kernel's registers on the GPU vs the estimate
fusec MODEL.mlir -p decompose,form-fusion-groups --remarks   # + one line per fusion decision
fusec MODEL.mlir --emit dot -o groups.dot                   # op graph, groups as clusters
fusec --list-passes
```

Bad input prints `file:line:col: error: message` and exits with code 1; a
crash inside fusec prints an internal-error line (the traceback with
`--traceback`).

This is the driver's command line: its jobs and `fusec run`. The `fusec`
console script is `fusec/command.py`, which adds `fusec import` (the
importers sit above the driver, so this module cannot reach them);
`python -m fusec.compiler.cli` runs every command but `import`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fusec.analysis.diagnostics import FusecError, InternalError, escape_controls
from fusec.compiler.arg_parser import FusecArgumentParser
from fusec.compiler.arg_types import non_negative_int
from fusec.compiler.pass_error import InternalPassError
from fusec.version import __version__

if TYPE_CHECKING:  # the compiler (and xDSL) is imported only when a job needs it
    from fusec.compiler.cli_cache import CachedCompile
    from fusec.compiler.instrument import Instrumentation


@dataclass(frozen=True)
class Subcommand:
    """A command `fusec NAME ...`: the function that runs it
    (`main(argv) -> exit code`, importing its module only when called), its
    line in `fusec --help`, and its usage after the name."""

    main: Callable[[list[str]], int]
    summary: str
    usage: str


def _run(argv: list[str]) -> int:
    from fusec.compiler.run_command import main as run_main

    return run_main(argv)


SUBCOMMANDS: dict[str, Subcommand] = {
    "run": Subcommand(_run, "run a compiled model's kernels (--check: compare with the "
                      "reference)", "MODEL_OR_OUT [options]"),
}
"""The driver's own subcommands. The `fusec` command (`fusec/command.py`, above
every layer) adds `fusec import`, whose importers sit above the driver."""


def _usage(subcommands: Mapping[str, Subcommand]) -> str:
    lines = ["fusec MODEL [-o OUT] [-p PIPELINE] [options]",
             *(f"fusec {name} {sub.usage}" for name, sub in subcommands.items()),
             "fusec --list-passes | --version | --help"]
    return "\n       ".join(lines)


def _epilog(subcommands: Mapping[str, Subcommand]) -> str:
    """The commands, one line each, as `git --help` lists them."""
    rows = [("MODEL", "compile MODEL (-o OUT), or print its IR after the pipeline "
             "(the options above)"),
            *((name, sub.summary) for name, sub in subcommands.items())]
    lines = [f"  fusec {name:<7} {text}" for name, text in rows]
    more = " and ".join(f"'fusec {name} --help'" for name in subcommands)
    return "commands:\n" + "\n".join(lines) + f"\n\n{more} show their options."


def build_parser(subcommands: Mapping[str, Subcommand] = SUBCOMMANDS) -> argparse.ArgumentParser:
    """The arguments of the main (compile / transform) job; `--help` also
    lists `subcommands`."""
    p = FusecArgumentParser(
        prog="fusec",
        usage=_usage(subcommands),
        description="fusec: a kernel-fusion compiler for tensor programs in the nn dialect.",
        epilog=_epilog(subcommands),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("input", nargs="?", help="the model (.mlir); '-' reads stdin")
    p.add_argument("-p", "--passes", "--pipeline", dest="passes", metavar="PIPELINE",
                   help="the pass pipeline, comma-separated passes with space-separated "
                   "options, e.g. 'decompose,form-fusion-groups{target=h200 policy=greedy}'; "
                   "replaces the default pipeline (the compile job's, printed in report.md "
                   "and plan.json) in every job")
    p.add_argument("-o", "--output", metavar="PATH",
                   help="where to write the result: the output directory OUT of the compile "
                   "job; a name ending in .mlir gets the IR after the pipeline instead "
                   "(with --emit dot: the graph)")
    p.add_argument("--insert-after", action="append", default=[], metavar="NAME=PASS",
                   help="run PASS (with its options) after every pass NAME of the pipeline")
    p.add_argument("--insert-before", action="append", default=[], metavar="NAME=PASS",
                   help="run PASS (with its options) before every pass NAME of the pipeline")
    p.add_argument("--no-fusion", action="store_true",
                   help="default pipeline: one kernel per op (skip form-fusion-groups)")
    p.add_argument("--no-fold-constants", action="store_true",
                   help="default pipeline: keep ops that read only constants as kernels "
                   "(skip fold-constants)")
    p.add_argument("--target", metavar="NAME",
                   help="default pipeline: the GPU profile to compile for (default: auto)")
    p.add_argument("--ptx-info", action="store_true",
                   help="compile job: compile the kernels and record their real registers "
                   "and spills in plan.json and report.md, beside the estimate (slow)")
    p.add_argument("--register-source", choices=["auto", "ptxas", "gpu"],
                   help="compile job, implies --ptx-info: where the real counts come from: "
                   "'ptxas' (the target's architecture, no GPU needed), 'gpu' (the kernels "
                   "compiled for the GPU present) or 'auto' (the GPU if any, else ptxas; the "
                   "default)")
    p.add_argument("--check-precision", action="store_true",
                   help="default pipeline: run each fused group on random data and split the "
                   "groups whose result differs from the unfused one by more than the "
                   "tolerance of their element type (pass check-precision)")
    p.add_argument("--max-registers", type=non_negative_int, metavar="N",
                   help="default pipeline: every kernel is capped at N registers per thread; "
                   "a group is re-tiled, or split when its capped kernel (ptxas) would spill "
                   "more than the split costs (pass register-budget)")
    p.add_argument("--shared-memory-limit", type=non_negative_int, metavar="BYTES",
                   help="default pipeline: shared memory per block; bigger tiles are shrunk "
                   "(pass tile-and-promote)")
    p.add_argument("--gemm", choices=["auto", "library", "fused"],
                   help="default pipeline: matmuls as a library GEMM (cuBLAS through CuPy) plus "
                   "an epilogue kernel, as fused SIMT kernels, or as the cost model "
                   "decides (default)")
    p.add_argument("--conv", choices=["auto", "library", "fused"],
                   help="default pipeline: convolutions as a library call (cuDNN) plus an "
                   "epilogue kernel, as fusec's own kernels, or as the cost model decides "
                   "(default; fusec's own where cuDNN is not installed)")
    p.add_argument("--attention", choices=["auto", "library", "fused"],
                   help="default pipeline: an attention as one cuDNN fused attention call "
                   "(f16/bf16, unmasked; needs cuDNN and nvidia-cudnn-frontend), as fusec's "
                   "own kernel, or as the cost model decides (default)")
    p.add_argument("--conv-tf32", action="store_true",
                   help="default pipeline: f32 library convolutions may run on TF32 tensor "
                   "cores (10-bit mantissa products, f32 sums)")
    p.add_argument("--no-library-timing", action="store_true",
                   help="compile job: decide cuDNN or fusec's own kernel per convolution by "
                   "the cost model alone, without timing cuDNN's call on the GPU present "
                   "(done where it is the GPU compiled for; docs/scheduling.md)")
    p.add_argument("--no-library-epilogue", action="store_true",
                   help="default pipeline: keep a library GEMM's bias, residual and "
                   "activation out of its cuBLASLt call (they run in an epilogue kernel)")
    p.add_argument("--save-kernels", action="store_true",
                   help="compile job: compile every kernel to PTX now (all cores) and keep it "
                   "in OUT/kernels and the per-user cache, so that running OUT links the "
                   "kernels instead of JIT-compiling them")
    p.add_argument("--autotune", action="store_true",
                   help="compile job: time each group's candidate schedules (and fused "
                   "against split where the model is unsure, and cuDNN/cuBLAS against "
                   "fusec's own kernel where --conv/--gemm is auto) on the GPU and keep "
                   "the fastest; results are kept in the per-user tuning cache")
    p.add_argument("--autotune-top-k", type=non_negative_int, metavar="N",
                   help="candidate schedules timed per group with --autotune (default 4)")
    p.add_argument("--no-tuning-cache", action="store_true",
                   help="with --autotune: neither read nor write the tuning cache")
    p.add_argument("--no-cache", action="store_true",
                   help="compile job: compile even when the per-user program cache holds "
                   "the result, and keep nothing in it (FUSEC_PROGRAM_CACHE=0 for every "
                   "job; docs/running.md)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar while kernels are compiled, no note when OUT "
                   "comes from the program cache")
    p.add_argument("--remarks", action="store_true",
                   help="print one line per fusion decision (fused / missed, with the "
                   "reason) to stderr after the passes ran")
    p.add_argument("--remarks-in-ir", action="store_true",
                   help="keep the remarks in printed and written IR (model.mlir), as the "
                   "module attribute fusion.remarks; without it the IR leaves them out")
    p.add_argument("--emit", choices=["dot"],
                   help="'dot': write the op graph after the pipeline, fusion groups as "
                   "Graphviz clusters and shapes on the edges (stdout or -o FILE.dot)")
    p.add_argument("--split-input-file", action="store_true",
                   help="treat each '// -----' section as its own module")
    p.add_argument("--verify-diagnostics", action="store_true",
                   help="print an error as output (exit 0) instead of failing")
    p.add_argument("--print-op-generic", action="store_true",
                   help="print every op in MLIR's generic form")
    p.add_argument("--print-ir-after-all", action="store_true",
                   help="print the IR to stderr after every pass")
    p.add_argument("--print-ir-before", action="append", default=[], metavar="NAME",
                   help="print the IR to stderr before the pass NAME (repeat or "
                   "comma-separate for several)")
    p.add_argument("--print-ir-after", action="append", default=[], metavar="NAME",
                   help="print the IR to stderr after the pass NAME")
    p.add_argument("--mlir-timing", action="store_true",
                   help="print the wall time of every pass and stage to stderr at the end")
    p.add_argument("--load-pass-plugin", action="append", default=[], metavar="FILE.py",
                   help="register the ModulePass subclasses defined in FILE.py")
    p.add_argument("--list-passes", action="store_true", help="list the available passes")
    p.add_argument("--version", action="version", version=f"fusec {__version__}")
    p.add_argument("--traceback", action="store_true",
                   help="show the Python traceback of internal errors")
    return p


def main(argv: list[str] | None = None,
         subcommands: Mapping[str, Subcommand] = SUBCOMMANDS) -> int:
    """Run the driver on `argv` (default: the command line) with
    `subcommands` (the `fusec` command passes its own, `import` included);
    returns the exit code."""
    args = sys.argv[1:] if argv is None else argv
    sources: dict[str, str] = {}
    traceback = "--traceback" in args
    try:
        return _dispatch(args, sources, subcommands)
    except FusecError as err:
        print(err.render(sources), file=sys.stderr)
        return 1
    except OSError as err:
        if err.filename is None or traceback:
            raise
        # A path the system refuses (too long, no permission, disk full) is the
        # user's to fix, wherever it is first touched.
        print(f"fusec: error: cannot use '{err.filename}': {err.strerror}", file=sys.stderr)
        return 1
    except InternalError as err:
        if traceback:
            raise
        print(f"fusec: internal error: {escape_controls(str(err))}", file=sys.stderr)
        return 1
    except (InternalPassError, Exception) as err:
        if traceback:
            raise
        # InternalPassError's message already says "internal error in pass ...".
        what = str(err) if isinstance(err, InternalPassError) else (
            f"internal error: {type(err).__name__}: {err}"
        )
        print(f"fusec: {escape_controls(what)} (rerun with --traceback for details)",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("fusec: interrupted", file=sys.stderr)
        return 130


def _dispatch(argv: list[str], sources: dict[str, str],
              subcommands: Mapping[str, Subcommand]) -> int:
    if argv and argv[0] in subcommands:
        return subcommands[argv[0]].main(argv[1:])
    args = build_parser(subcommands).parse_args(argv)
    if args.list_passes:
        return _list_passes(args.load_pass_plugin)
    if args.input is None:
        raise FusecError("no input file (try 'fusec --help')")
    from fusec.compiler.cli_flags import check_flags, instrumentation

    compile_job = check_flags(args)
    if args.output is not None:
        from fusec.compiler.outputs import refuse_input_as_output

        # Before any work: the output must not overwrite (or, as OUT, hold) an input.
        refuse_input_as_output(args.output, [args.input, *args.load_pass_plugin],
                               directory=compile_job)
    cached = None
    if compile_job:
        from fusec.compiler.cli_cache import CachedCompile

        cached = CachedCompile.open(args, sources)
        if cached.write_hit(args.output, args.quiet):
            return 0  # nothing compiled: the compiler is not even imported
    instrument = instrumentation(args)
    try:
        if args.remarks:
            from fusec.analysis.remarks import remarks_to_stderr

            with remarks_to_stderr():
                return _run_job(args, sources, cached, instrument)
        return _run_job(args, sources, cached, instrument)
    finally:
        if args.mlir_timing:
            sys.stderr.write(instrument.timer.report())


def _run_job(args: argparse.Namespace, sources: dict[str, str], cached: CachedCompile | None,
             instrument: Instrumentation) -> int:
    """The compile job (`-o OUT`, `cached` its model) or the IR job (IR or
    `--emit dot` printed)."""
    from fusec.compiler.cli_flags import insertions, pipeline_options

    if cached is not None:
        return _compile_job(args, sources, cached, instrument)
    from fusec.compiler.driver import OptOptions, run_opt

    render = None
    if args.emit == "dot":
        from fusec.analysis.remarks import module_to_dot

        render = module_to_dot
    run_opt(
        OptOptions(
            input=args.input,
            pipeline=args.passes,
            output=args.output,
            split_input_file=args.split_input_file,
            verify_diagnostics=args.verify_diagnostics,
            print_op_generic=args.print_op_generic,
            plugins=args.load_pass_plugin,
            defaults=pipeline_options(args),
            insertions=insertions(args),
            instrument=instrument,
            render=render,
        ),
        sources,
    )
    return 0


def _compile_job(args: argparse.Namespace, sources: dict[str, str], cached: CachedCompile,
                 instrument: Instrumentation) -> int:
    """`fusec MODEL.mlir -o OUT`: compile and write OUT whole or not at all,
    then keep the result in the program cache (`compiler/cli_cache.py`)."""
    from fusec.compiler.cli_flags import autotune_options, insertions, pipeline_options
    from fusec.compiler.compile import compile_model, write_out
    from fusec.runtime.user_key import load_key

    load_key(create=True)  # an unusable key fails now, not after a long compile
    options = pipeline_options(args)
    artifacts = compile_model(**cached.compile_args(), fusion=options.fusion,
                              target=options.target,
                              ptx_info=args.ptx_info or args.register_source is not None,
                              register_source=args.register_source or "auto",
                              plugins=args.load_pass_plugin,
                              sources=sources, check_precision=options.check_precision,
                              fold_constants=options.fold_constants,
                              schedule=options.schedule, pipeline=args.passes,
                              insertions=insertions(args), instrument=instrument,
                              autotune=autotune_options(args))
    if artifacts.tuning is not None and not args.quiet:
        print(f"fusec: note: autotune: {artifacts.tuning.summary()}", file=sys.stderr)
    entries = []
    if args.save_kernels:
        from fusec.runtime.kernel_loader import compile_for_out
        from fusec.runtime.progress import set_quiet

        set_quiet(args.quiet)
        entries = compile_for_out(artifacts.program)
    with instrument.timer.timed("(writing OUT)"):
        write_out(artifacts, args.output, entries)
    cached.keep(artifacts)
    return 0


def _list_passes(plugins: list[str]) -> int:
    from fusec.compiler.driver import make_registry

    rows = make_registry(plugins).describe()
    width = max(len(n) for n, _ in rows)
    for name, doc in rows:
        print(f"{name:<{width}}  {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
