"""Import ONNX models into the `nn` dialect (`fusec import MODEL.onnx -o MODEL.mlir`).

Needs the optional `onnx` package (`pip install fusec[onnx]`). See docs/onnx.md
for the supported ops, the weight handling and a walk-through from PyTorch.

The names below are imported on first use, so that `fusec.importers.onnx.emit`
(the `nn` text emitter, which the PyTorch importer shares) loads without onnx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fusec.importers.onnx.context import NeedsConstantError, OnnxImportError
    from fusec.importers.onnx.graph import ImportResult, import_model

    SUPPORTED_OPS: frozenset[str]
    """ONNX op types (default domain) the importer handles."""

__all__ = [
    "SUPPORTED_OPS",
    "ImportResult",
    "NeedsConstantError",
    "OnnxImportError",
    "import_model",
]


def __getattr__(name: str) -> object:
    """The public names, imported (with onnx) when first asked for."""
    if name in ("NeedsConstantError", "OnnxImportError"):
        from fusec.importers.onnx import context

        return getattr(context, name)
    if name in ("ImportResult", "import_model"):
        from fusec.importers.onnx import graph

        return getattr(graph, name)
    if name == "SUPPORTED_OPS":
        from fusec.importers.onnx.graph import HANDLERS

        return frozenset(HANDLERS)
    raise AttributeError(f"module 'fusec.importers.onnx' has no attribute '{name}'")
