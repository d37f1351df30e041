"""Import ONNX models into the `nn` dialect (`fusec import MODEL.onnx -o MODEL.mlir`).

Needs the optional `onnx` package (`pip install fusec[onnx]`). See docs/onnx.md
for the supported ops, the weight handling and a walk-through from PyTorch.
"""

from __future__ import annotations

from fusec.importers.onnx.context import NeedsConstantError, OnnxImportError
from fusec.importers.onnx.graph import HANDLERS, ImportResult, import_model

SUPPORTED_OPS: frozenset[str] = frozenset(HANDLERS)
"""ONNX op types (default domain) the importer handles."""

__all__ = [
    "SUPPORTED_OPS",
    "ImportResult",
    "NeedsConstantError",
    "OnnxImportError",
    "import_model",
]
