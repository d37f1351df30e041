"""A `torch.export` ExportedProgram -> one `nn` module (`fusec import model.pt2`).

```python
result = fusec.from_torch(model, (x,))            # exports, then translates
result = fusec.torch.from_exported(torch.export.export(model, (x,)))
print(result.text)                                 # func.func @main(%x: ...) -> ...
result.inputs                                      # {'x': 'x'}: input -> argument
```

The program is decomposed to core ATen ops (with attention as math, as the
backend does) and translated whole: a node fusec cannot express is an error
naming it and the source line. Parameters, buffers and tensor constants
become `nn.constant`s, except floating-point ones of at least `params_above`
bytes, which become trailing function arguments returned in
`result.params` (keyed by argument name) — the mechanism of the ONNX
importer's `--params-above`, so `fusec run --inputs` reads them the same way.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import fx
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind
from xdsl.dialects.builtin import ModuleOp

from fusec.importers.checked_parse import parse_imported
from fusec.importers.onnx.emit import FLOAT_DTYPES
from fusec.importers.torch.context import BF16, TorchImportError, to_numpy
from fusec.importers.torch.decompositions import decompositions
from fusec.importers.torch.translate import translate_graph


@dataclass(frozen=True)
class TorchImportResult:
    """An imported program: its `nn` text, the parsed and verified module,
    and how the program's input names map to the function's arguments."""

    text: str
    module: ModuleOp
    inputs: dict[str, str]
    outputs: list[str]
    params: dict[str, np.ndarray] = field(default_factory=dict[str, np.ndarray])
    """Weights that became arguments (`params_above`), keyed by argument name."""


def from_torch(module: torch.nn.Module, example_inputs: Sequence[Any],
               params_above: int | None = None, filename: str = "model.mlir",
               name: str = "main") -> TorchImportResult:
    """Export `module` with `torch.export.export(module, example_inputs)` and
    translate it (`from_exported`). Put the module in eval mode first for
    inference (batch norm with running statistics, no dropout)."""
    try:
        with _quiet_torch():
            exported = torch.export.export(module, tuple(example_inputs))
    except Exception as err:  # torch.export raises many kinds of its own errors
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise TorchImportError(f"torch.export cannot export the module: {first}") from None
    return from_exported(exported, params_above, filename, name)


def load_pt2(path: str | Path) -> ExportedProgram:
    """Read a file written by `torch.export.save` (a `.pt2` archive).

    The archive is PyTorch's own format; loading it runs PyTorch's loader,
    so open only files you trust, as with any PyTorch checkpoint."""
    path = Path(path)
    if not path.is_file():
        raise TorchImportError(f"cannot read '{path}': no such file")
    try:
        with _quiet_torch():
            return torch.export.load(str(path))
    except Exception as err:  # zip, JSON and pickle errors alike
        raise TorchImportError(f"'{path}' is not a program saved by torch.export.save: "
                               f"{str(err).strip().splitlines()[0] if str(err) else err}"
                               ) from None


def from_exported(exported: ExportedProgram, params_above: int | None = None,
                  filename: str = "model.mlir", name: str = "main") -> TorchImportResult:
    """Translate an ExportedProgram into a verified `nn` module."""
    with _quiet_torch():
        exported = exported.run_decompositions(decompositions())
    for spec in exported.graph_signature.output_specs:
        if spec.kind != OutputKind.USER_OUTPUT:
            raise TorchImportError(f"the program {spec.kind.name.lower()}s "
                                   f"'{spec.target}'; only inference programs without "
                                   "mutation are supported")
    gm = exported.graph_module
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    constants: dict[fx.Node, np.ndarray] = {}
    weights: dict[fx.Node, np.ndarray] = {}
    user: dict[fx.Node, str] = {}
    for node, spec in zip(placeholders, exported.graph_signature.input_specs, strict=True):
        if spec.kind == InputKind.USER_INPUT:
            user[node] = spec.arg.name
            continue
        array = _state_value(exported, spec.target, spec.kind)
        big = (params_above is not None and array.dtype.name in FLOAT_DTYPES
               and array.nbytes >= params_above)
        (weights if big else constants)[node] = array
    translation = translate_graph(gm, name, constants, trailing=frozenset(weights))
    args = {node: val.name for node, val in zip(
        [*user, *weights], translation.args, strict=True)}
    inputs = {user[n]: args[n] for n in user}
    # A bf16 weight's values as float32 (exact): the runtime's host form of
    # bf16, which `np.savez` and `fusec run --inputs` read without ml_dtypes.
    params = {args[n]: weights[n].astype(np.float32) if weights[n].dtype == BF16
              else weights[n] for n in weights}
    outputs = [str(getattr(s.arg, "name", "")) for s in exported.graph_signature.output_specs]
    text = (_header() + "".join(f"// input '{k}' -> %{v}\n" for k, v in inputs.items())
            + translation.text)
    module = parse_imported(text, filename, TorchImportError)
    return TorchImportResult(text, module, inputs, outputs, params)


def _state_value(exported: ExportedProgram, target: str | None, kind: InputKind) -> np.ndarray:
    """A parameter's, buffer's or constant's value as a NumPy array."""
    value = exported.state_dict.get(target) if target else None
    if value is None and target:
        value = exported.constants.get(target)
    if not isinstance(value, torch.Tensor):
        raise TorchImportError(f"{kind.name.lower()} '{target}' has no tensor value in "
                               "the exported program")
    try:
        return to_numpy(value)
    except TypeError as err:  # bf16 and other types NumPy lacks
        raise TorchImportError(f"{kind.name.lower()} '{target}' has element type "
                               f"{value.dtype}, which fusec does not support ({err})") from None


@contextlib.contextmanager
def _quiet_torch() -> Iterator[None]:
    """PyTorch's export machinery warns about its own deprecated internals
    (`LeafSpec`); those warnings are not the user's to act on."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


def _header() -> str:
    return "// Imported from a torch.export program by fusec.\n"
