"""Helpers for the reference-interpreter tests: one-op programs built as MLIR
text, parsed, verified and run with `fusec.reference.interpreter`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.verify import verify_module
from fusec.reference.interpreter import run_module

CTX = make_context()
_ELEMENTS = {"float64": "f32", "float32": "f32", "int32": "i32", "int64": "i64", "bool": "i1"}


def parse(text: str) -> ModuleOp:
    """Parse and verify a test program."""
    module = parse_module(CTX, text, "test.mlir")
    verify_module(module)
    return module


def ttype(shape: Sequence[int], element: str = "f32") -> str:
    """`tensor<2x3xf32>` for shape (2, 3)."""
    return "tensor<" + "".join(f"{d}x" for d in shape) + element + ">"


def type_of(array: np.ndarray) -> str:
    """The tensor type of an array (float64 arrays pass as f32 inputs)."""
    return ttype(array.shape, _ELEMENTS[array.dtype.name])


def run_op(
    op: str,
    *operands: np.ndarray,
    result: str,
    attrs: str = "",
    dtype: type = np.float64,
) -> np.ndarray:
    """Run a one-op function `@f` whose arguments are `operands`."""
    types = [type_of(np.asarray(a)) for a in operands]
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(types))
    names = ", ".join(f"%a{i}" for i in range(len(types)))
    attr_text = f" {{{attrs}}}" if attrs else ""
    text = (
        f"func.func @f({args}) -> {result} {{\n"
        f"  %r = {op} {names}{attr_text} : ({', '.join(types)}) -> {result}\n"
        f"  func.return %r : {result}\n}}\n"
    )
    (out,) = run_module(parse(text), list(operands), dtype=dtype)
    return out
