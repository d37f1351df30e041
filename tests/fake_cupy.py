"""A `cupy` stand-in over NumPy for tests of library GEMM launches in the
simulator: the runtime hands it NumPy views of the simulator's arrays and
it computes what cuBLAS (and CuPy's own epilogue ops) would."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable

import numpy as np
import pytest

MatMul = Callable[..., np.ndarray]


def out_matmul(product: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> MatMul:
    """`cupy.matmul(a, b, out=None)` computing `product(a, b)`."""
    def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        c = product(a, b)
        if out is None:
            return c
        out[...] = c
        return out
    return matmul


def install_fake_cupy(monkeypatch: pytest.MonkeyPatch, matmul: MatMul = np.matmul,
                      no_cublaslt: bool = False) -> types.ModuleType:
    """Put a `cupy` module over NumPy in `sys.modules` for the test:
    `asarray`, `swapaxes`, `matmul`, `maximum`, `tanh`, a current device 0
    and no external streams; `no_cublaslt`: `cupy_backends` missing, so the
    runtime cannot load libcublasLt and runs a GEMM's epilogue with CuPy."""
    fake = types.ModuleType("cupy")
    fake.asarray = lambda a: np.asarray(a)  # type: ignore[attr-defined]
    fake.swapaxes, fake.matmul = np.swapaxes, matmul  # type: ignore[attr-defined]
    fake.maximum, fake.tanh = np.maximum, np.tanh  # type: ignore[attr-defined]
    fake.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        ExternalStream=None, Device=lambda: types.SimpleNamespace(id=0))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    if no_cublaslt:
        monkeypatch.setitem(sys.modules, "cupy_backends", None)
    return fake
