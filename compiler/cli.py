"""The `fusec` command line.

```
fusec MODEL.mlir -p decompose            # run passes, print the IR (like xdsl-opt)
fusec MODEL.mlir                         # run the default pipeline, print the IR
fusec MODEL.mlir -o OUT                  # compile: OUT/model.mlir, kernels.py, plan.json, ...
fusec MODEL.mlir -o OUT --check-precision   # + split fused groups that drift from unfused
fusec MODEL.mlir -o OUT --ptx-info          # + real registers and spills (GPU, else ptxas)
fusec run MODEL.mlir|OUT --check         # run the kernels, compare with the reference
fusec run OUT --registers                # + each kernel's registers on the GPU vs the estimate
fusec MODEL.mlir -p decompose,form-fusion-groups --remarks   # + one line per fusion decision
fusec MODEL.mlir --emit dot -o groups.dot                   # op graph, groups as clusters
fusec --list-passes
```

Bad input prints `file:line:col: error: message` and exits with code 1; a
crash inside fusec prints an internal-error line (the traceback with
`--traceback`).
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

import fusec
from fusec.compiler.diagnostics import FusecError, escape_controls
from fusec.compiler.pipeline import DEFAULT_PIPELINE, InternalPassError

# Subcommands, imported only when used: `fusec run ...`, `fusec import ...`.
# Each target is a `main(argv: list[str]) -> int` function.
SUBCOMMANDS: dict[str, str] = {
    "run": "fusec.compiler.run_command:main",
    "import": "fusec.importers.onnx.cli:main",
}


class _ArgumentParser(argparse.ArgumentParser):
    """argparse that exits with code 1 (not 2) and fusec's error style."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"fusec: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The arguments of the main (compile / transform) job."""
    p = _ArgumentParser(
        prog="fusec",
        description="fusec: a kernel-fusion compiler for tensor programs in the nn dialect.",
    )
    p.add_argument("input", nargs="?", help="the model (.mlir); '-' reads stdin")
    p.add_argument("-p", "--passes", metavar="PIPELINE",
                   help="comma-separated passes with options, e.g. 'decompose'; "
                   "prints the IR instead of compiling")
    p.add_argument("-o", "--output", metavar="PATH",
                   help="where to write the result: without -p, the output directory OUT "
                   "of the compile job (a name ending in .mlir gets the final IR instead)")
    p.add_argument("--no-fusion", action="store_true",
                   help="compile job: one kernel per op (skip form-fusion-groups)")
    p.add_argument("--no-fold-constants", action="store_true",
                   help="compile job: keep ops that read only constants as kernels "
                   "(skip fold-constants)")
    p.add_argument("--target", default="auto", metavar="NAME",
                   help="compile job: the GPU profile to compile for (default: auto)")
    p.add_argument("--ptx-info", action="store_true",
                   help="compile job: compile the kernels and record their real registers "
                   "and spills in plan.json and report.md, beside the estimate (slow)")
    p.add_argument("--register-source", choices=["auto", "ptxas", "gpu"],
                   help="compile job, implies --ptx-info: where the real counts come from: "
                   "'ptxas' (-arch=sm_90, no GPU needed), 'gpu' (the kernels compiled for "
                   "the GPU present) or 'auto' (the GPU if any, else ptxas; the default)")
    p.add_argument("--check-precision", action="store_true",
                   help="compile job: run each fused group on random data and split the "
                   "groups whose result differs from the unfused one by more than the "
                   "tolerance of their element type (pass check-precision)")
    p.add_argument("--max-registers", type=int, default=0, metavar="N",
                   help="compile job: registers per thread no kernel may exceed; groups "
                   "estimated over N are split or re-tiled (pass register-budget)")
    p.add_argument("--shared-memory-limit", type=int, default=0, metavar="BYTES",
                   help="compile job: shared memory per block; bigger tiles are shrunk "
                   "(pass tile-and-promote)")
    p.add_argument("--gemm", choices=["auto", "library", "fused"], default="auto",
                   help="compile job: matmuls as a library GEMM (cuBLAS through CuPy) plus "
                   "an epilogue kernel, as fused SIMT kernels, or as the cost model "
                   "decides (default)")
    p.add_argument("--remarks", action="store_true",
                   help="print one line per fusion decision (fused / missed, with the "
                   "reason) to stderr after compiling")
    p.add_argument("--emit", choices=["dot"],
                   help="'dot': write the op graph with its fusion groups as Graphviz "
                   "clusters (stdout or -o FILE.dot); -p picks the passes")
    p.add_argument("--split-input-file", action="store_true",
                   help="treat each '// -----' section as its own module")
    p.add_argument("--verify-diagnostics", action="store_true",
                   help="print an error as output (exit 0) instead of failing")
    p.add_argument("--print-op-generic", action="store_true",
                   help="print every op in MLIR's generic form")
    p.add_argument("--print-ir-after-all", action="store_true",
                   help="print the IR to stderr after every pass")
    p.add_argument("--load-pass-plugin", action="append", default=[], metavar="FILE.py",
                   help="register the ModulePass subclasses defined in FILE.py")
    p.add_argument("--list-passes", action="store_true", help="list the available passes")
    p.add_argument("--version", action="version", version=f"fusec {fusec.__version__}")
    p.add_argument("--traceback", action="store_true",
                   help="show the Python traceback of internal errors")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `fusec` console script."""
    args = sys.argv[1:] if argv is None else argv
    sources: dict[str, str] = {}
    traceback = "--traceback" in args
    try:
        return _dispatch(args, sources)
    except FusecError as err:
        print(err.render(sources), file=sys.stderr)
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


def _dispatch(argv: list[str], sources: dict[str, str]) -> int:
    if argv and argv[0] in SUBCOMMANDS:
        module, func = SUBCOMMANDS[argv[0]].split(":")
        import importlib

        return int(getattr(importlib.import_module(module), func)(argv[1:]))
    args = build_parser().parse_args(argv)
    if args.list_passes:
        return _list_passes(args.load_pass_plugin)
    if args.input is None:
        raise FusecError("no input file (try 'fusec --help')")
    if args.emit == "dot":
        from fusec.compiler.remarks import emit_dot

        return emit_dot(args.input, args.passes, args.output, args.load_pass_plugin, sources)
    if args.remarks:
        from fusec.compiler.remarks import remarks_to_stderr

        with remarks_to_stderr():
            return _run_job(args, sources)
    return _run_job(args, sources)


def _run_job(args: argparse.Namespace, sources: dict[str, str]) -> int:
    """The compile job (`-o OUT`) or the pass-pipeline job (`-p`, IR printed)."""
    if args.passes is None and args.output is not None and not args.output.endswith(".mlir"):
        return _compile_job(args, sources)
    from fusec.compiler.driver import OptOptions, run_opt

    run_opt(
        OptOptions(
            input=args.input,
            pipeline=args.passes if args.passes is not None else DEFAULT_PIPELINE,
            output=args.output,
            split_input_file=args.split_input_file,
            verify_diagnostics=args.verify_diagnostics,
            print_ir_after_all=args.print_ir_after_all,
            print_op_generic=args.print_op_generic,
            plugins=args.load_pass_plugin,
        ),
        sources,
    )
    return 0


def _compile_job(args: argparse.Namespace, sources: dict[str, str]) -> int:
    """`fusec MODEL.mlir -o OUT`: compile and write OUT whole or not at all."""
    if args.split_input_file or args.verify_diagnostics:
        raise FusecError("--split-input-file and --verify-diagnostics need -p (not -o OUT)")
    from fusec.compiler.compile import ScheduleOptions, compile_model, write_out

    artifacts = compile_model(args.input, fusion=not args.no_fusion, target=args.target,
                              ptx_info=args.ptx_info or args.register_source is not None,
                              register_source=args.register_source or "auto",
                              plugins=args.load_pass_plugin,
                              sources=sources, check_precision=args.check_precision,
                              fold_constants=not args.no_fold_constants,
                              schedule=ScheduleOptions(args.max_registers,
                                                       args.shared_memory_limit, args.gemm))
    write_out(artifacts, args.output)
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
