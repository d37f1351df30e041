"""`fusec import MODEL.onnx [-o MODEL.mlir]`: write the model as `nn` IR.

```
fusec import mobilenet.onnx -o mobilenet.mlir
fusec mobilenet.mlir -o out/
```

The output is written only after the whole model imported, parsed and
verified; errors name the ONNX node (`error: node 'Conv_3' (Conv): ...`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import numpy as np

from fusec.compiler.arg_types import non_negative_int
from fusec.compiler.diagnostics import FusecError


class _ArgumentParser(argparse.ArgumentParser):
    """argparse that exits with code 1 (not 2), like the other fusec commands."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(1, f"fusec import: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The arguments of `fusec import`."""
    p = _ArgumentParser(
        prog="fusec import",
        description="Import an ONNX model into the nn dialect (weights become constants).",
    )
    p.add_argument("model", help="the ONNX model (.onnx); external data must lie beside it")
    p.add_argument("-o", "--output", metavar="PATH",
                   help="where to write the .mlir (default: stdout)")
    p.add_argument("--params-above", metavar="BYTES", type=non_negative_int,
                   help="float weights of at least BYTES become function arguments, written "
                   "to OUTPUT.params.npz keyed by argument name (default: all weights are "
                   "constants in the .mlir)")
    return p


def main(argv: list[str]) -> int:
    """Run `fusec import`; returns the exit code (errors exit 1)."""
    args = build_parser().parse_args(argv)
    try:
        from fusec.importers.onnx.context import printable
        from fusec.importers.onnx.graph import import_model
    except ImportError:
        raise FusecError("'fusec import' needs the onnx package: pip install 'fusec[onnx]'"
                         ) from None
    output = Path(args.output) if args.output else None
    if args.params_above is not None and output is None:
        raise FusecError("--params-above needs -o OUTPUT (the params go beside it)")
    result = import_model(args.model, filename=str(output or "<stdout>"),
                          params_above=args.params_above)
    if output is None:
        sys.stdout.write(result.text)
        return 0
    if result.params:
        params = params_path(output)
        _write_atomically(params, lambda p: np.savez(p, **result.params))
        print(f"note: {len(result.params)} weights are arguments; their values are in "
              f"{params}", file=sys.stderr)
    _write_atomically(output, lambda p: p.write_text(result.text, encoding="utf-8"))
    for onnx_name, arg in result.inputs.items():
        if onnx_name != arg:
            print(f"note: input '{printable(onnx_name)}' is argument %{arg}", file=sys.stderr)
    return 0


def params_path(output: Path) -> Path:
    """`model.mlir` -> `model.params.npz`, beside it."""
    return output.with_name(output.stem + ".params.npz")


def _write_atomically(target: Path, write: Callable[[Path], object]) -> None:
    """Write beside the target and rename, so a failure leaves no half file."""
    partial = target.with_name(target.name + ".partial" + target.suffix)
    try:
        write(partial)
        partial.replace(target)
    except OSError as err:
        partial.unlink(missing_ok=True)
        raise FusecError(f"cannot write '{target}': {err.strerror}") from None
