"""Inputs off the 16-byte boundary on a real GPU (skipped without one): a
view one element into its buffer, as numba, CuPy and torch arrays, on the
per-call path and through graph replay, read by kernels that move 16-byte
words without testing addresses (`runtime/array_alignment.py`). A
misaligned word access is a launch failure on the GPU, so a missing copy
cannot pass."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import pytest

from fusec.runtime.executor import Executor
from tests.codegen_harness import compile_text

pytestmark = pytest.mark.gpu

FUSED = "decompose,form-fusion-groups"
ROWS, N = 64, 1024

LAYER_NORM = f"""func.func @f(%x: tensor<{ROWS}x{N}xf32>, %g: tensor<{N}xf32>)
    -> tensor<{ROWS}x{N}xf32> {{
  %m = nn.reduce_mean %x {{axes = [1], keepdims = true}}
      : (tensor<{ROWS}x{N}xf32>) -> tensor<{ROWS}x1xf32>
  %d = nn.sub %x, %m : (tensor<{ROWS}x{N}xf32>, tensor<{ROWS}x1xf32>) -> tensor<{ROWS}x{N}xf32>
  %q = nn.mul %d, %d : (tensor<{ROWS}x{N}xf32>, tensor<{ROWS}x{N}xf32>) -> tensor<{ROWS}x{N}xf32>
  %v = nn.reduce_mean %q {{axes = [1], keepdims = true}}
      : (tensor<{ROWS}x{N}xf32>) -> tensor<{ROWS}x1xf32>
  %r = nn.rsqrt %v : tensor<{ROWS}x1xf32>
  %n = nn.mul %d, %r : (tensor<{ROWS}x{N}xf32>, tensor<{ROWS}x1xf32>) -> tensor<{ROWS}x{N}xf32>
  %y = nn.mul %n, %g : (tensor<{ROWS}x{N}xf32>, tensor<{N}xf32>) -> tensor<{ROWS}x{N}xf32>
  func.return %y : tensor<{ROWS}x{N}xf32>
}}"""


def _want(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    d = x - x.mean(axis=1, keepdims=True)
    return d / np.sqrt((d * d).mean(axis=1, keepdims=True)) * g


def _one_in(kind: str, a: np.ndarray) -> Any:
    """`a` on the GPU as a `kind` array one element into its buffer."""
    flat = np.concatenate([np.zeros(1, a.dtype), a.ravel()])
    if kind == "numba":
        from numba import cuda

        return cuda.to_device(flat)[1:].reshape(a.shape)
    if kind == "cupy":
        cupy = pytest.importorskip("cupy")
        return cupy.asarray(flat)[1:].reshape(a.shape)
    torch = pytest.importorskip("torch")
    return torch.from_numpy(flat).cuda()[1:].reshape(a.shape)


def _host(y: Any) -> np.ndarray:
    if hasattr(y, "copy_to_host"):
        return np.asarray(y.copy_to_host())
    if hasattr(y, "get"):
        return np.asarray(y.get())
    return np.asarray(y.cpu().numpy())


@pytest.mark.parametrize("graphs", [False, True], ids=["per-call", "graphs"])
@pytest.mark.parametrize("kind", ["numba", "cupy", "torch"])
def test_a_view_one_element_in_is_copied_before_the_words(kind: str, graphs: bool) -> None:
    if graphs and importlib.util.find_spec("cupy") is None:
        pytest.skip("graph replay needs CuPy")
    program = compile_text(LAYER_NORM, FUSED)
    assert "ld_vec4_f32(in0" in program.kernels_source
    rng = np.random.default_rng(5)
    executor = Executor(program, "f", "gpu", graphs=graphs)
    for _ in range(3):  # graphs: the first call, a capture, a replay
        x = rng.standard_normal((ROWS, N)).astype(np.float32)
        g = rng.standard_normal(N).astype(np.float32)
        (y,) = executor([_one_in(kind, x), _one_in(kind, g)])
        np.testing.assert_allclose(_host(y), _want(x, g), rtol=1e-4, atol=1e-4)
