"""What the GPU checks of library calls share (bench/library_epilogue_check.py,
bench/library_conv_check.py): seeded reference inputs, a result read back as
float64, and the comparison of a compiled model with the reference
interpreter relative to the element type's tolerance."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np


def values(x: Any) -> np.ndarray:
    """A result as float64 (torch, CuPy, numba or NumPy; bf16 bits widened)."""
    if hasattr(x, "detach"):
        x = x.detach().float().cpu().numpy()
    elif hasattr(x, "copy_to_host"):
        x = x.copy_to_host()
    elif hasattr(x, "get"):
        x = x.get()
    x = np.asarray(x)
    if x.dtype == np.uint16:
        x = (x.astype(np.uint32) << 16).view(np.float32)
    return x.astype(np.float64)


def reference_inputs(text: str, dt: str, seed: int) -> tuple[Any, list[np.ndarray]]:
    """`@f` of `text` and its seeded random inputs (bf16 ones rounded to bf16;
    a boolean or integer input, a mask, as it is)."""
    from fusec.compiler.parsing import make_context, parse_module
    from fusec.dialects.element_types import round_to_bf16
    from fusec.reference.interpreter import find_function, random_inputs

    func = find_function(parse_module(make_context(), text, "m.mlir"), None)
    host = random_inputs(func, seed=seed)
    if dt != "bf16":
        return func, host
    return func, [round_to_bf16(a) if a.dtype.kind == "f" else a for a in host]


def compare(model: Any, text: str, dt: str, graphs: bool) -> tuple[bool, str]:
    """Run `model` on seeded inputs (three seeds under graphs, which must be
    used) against the reference: (passed, a line saying how it went). A
    warning (a library call that fell back) fails the case."""
    from fusec.dialects.element_types import element
    from fusec.reference.interpreter import run_function

    worst = 0.0
    for seed in range(3 if graphs else 1):
        func, host = reference_inputs(text, dt, seed)
        want = run_function(func, host)[0].astype(np.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = values(model(*host))
        scale = max(1.0, float(np.abs(want).max()))
        worst = max(worst, float(np.abs(got - want).max()) / scale)
    tol = element(dt).tolerance
    note = ""
    if graphs:
        used = getattr(model.executor, "graph", None) is not None
        note = f", graph {'used' if used else 'NOT used'}"
        if not used:
            return False, f"max rel err {worst:.3g} (tol {tol:.3g}){note}"
    return worst <= tol, f"max rel err {worst:.3g} (tol {tol:.3g}, {worst / tol:.2f} x){note}"
