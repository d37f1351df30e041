"""`fusec import MODEL.onnx [-o MODEL.mlir]`: write the model as `nn` IR.

```
fusec import mobilenet.onnx -o mobilenet.mlir
fusec import model.pt2 -o model.mlir      # torch.export.save output (importers/torch)
fusec mobilenet.mlir -o out/
```

The output is written only after the whole model imported, parsed and
verified; errors name the ONNX node (`error: node 'Conv_3' (Conv): ...`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from fusec.analysis.diagnostics import FusecError
from fusec.compiler.arg_parser import FusecArgumentParser
from fusec.compiler.arg_types import non_negative_int
from fusec.compiler.outputs import refuse_input_as_output, write_atomically, write_text_atomically


def build_parser() -> argparse.ArgumentParser:
    """The arguments of `fusec import`."""
    p = FusecArgumentParser(
        prog="fusec import",
        description="Import an ONNX model or a torch.export program into the nn dialect "
        "(weights become constants).",
    )
    p.add_argument("model", help="the ONNX model (.onnx; external data must lie beside it) "
                   "or a program saved by torch.export.save (.pt2)")
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
    output = Path(args.output) if args.output else None
    if args.params_above is not None and output is None:
        raise FusecError("--params-above needs -o OUTPUT (the params go beside it)")
    if output is not None:
        refuse_input_as_output(output, [args.model])
        refuse_input_as_output(params_path(output), [args.model])
    if str(args.model).endswith(".pt2"):
        return _import_pt2(args.model, output, args.params_above)
    try:
        from fusec.importers.onnx.graph import import_model
    except ImportError:
        raise FusecError("'fusec import' needs the onnx package: pip install 'fusec[onnx]'"
                         ) from None
    result = import_model(args.model, filename=str(output or "<stdout>"),
                          params_above=args.params_above)
    return write_result(result, output)


def _import_pt2(model: str, output: Path | None, params_above: int | None) -> int:
    try:
        from fusec.importers.torch.export_import import from_exported, load_pt2
    except ImportError:
        raise FusecError("importing a .pt2 program needs PyTorch: pip install 'fusec[torch]'"
                         ) from None
    result = from_exported(load_pt2(model), params_above, str(output or "<stdout>"))
    return write_result(result, output)


def write_result(result: Any, output: Path | None) -> int:
    """Write an import's text (and params file) to `output`, or the text to stdout."""
    if output is None:
        sys.stdout.write(result.text)
        return 0
    if result.params:
        params = params_path(output)
        write_atomically(str(params), lambda f: np.savez(f, **result.params))
        print(f"fusec: note: {len(result.params)} weights are arguments; their values are in "
              f"{params}", file=sys.stderr)
    write_text_atomically(str(output), result.text)
    for onnx_name, arg in result.inputs.items():
        if onnx_name != arg:
            shown = "".join(c if c.isprintable() else "?" for c in onnx_name)[:80]
            print(f"fusec: note: input '{shown}' is argument %{arg}", file=sys.stderr)
    return 0


def params_path(output: Path) -> Path:
    """`model.mlir` -> `model.params.npz`, beside it."""
    return output.with_name(output.stem + ".params.npz")

