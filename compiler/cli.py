"""The `fusec` command line.

```
fusec MODEL.mlir -p decompose            # run passes, print the IR (like xdsl-opt)
fusec MODEL.mlir                         # run the default pipeline, print the IR
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
from fusec.compiler.diagnostics import FusecError
from fusec.compiler.pipeline import DEFAULT_PIPELINE, InternalPassError


# Subcommands, imported only when used: `fusec run ...`, `fusec import ...`.
# Each target is a `main(argv: list[str]) -> int` function.
SUBCOMMANDS: dict[str, str] = {}


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
    p.add_argument("-o", "--output", metavar="PATH", help="where to write the result")
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
        print(f"fusec: internal error: {err} (rerun with --traceback for details)",
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


def _list_passes(plugins: list[str]) -> int:
    from fusec.compiler.driver import make_registry

    rows = make_registry(plugins).describe()
    width = max(len(n) for n, _ in rows)
    for name, doc in rows:
        print(f"{name:<{width}}  {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
