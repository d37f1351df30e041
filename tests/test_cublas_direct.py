"""The arguments of the direct cuBLAS call (runtime/cublas_direct.py),
checked on the CPU: a column-major strided-batched GEMM emulated with NumPy
on flat buffers must give the row-major `op(A) @ op(B)` of the plan."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fusec.runtime.cublas_direct import UnsupportedGemm, batch_stride, gemm_arguments


def _column_major(buf: np.ndarray, offset: int, rows: int, cols: int, ld: int) -> np.ndarray:
    return np.array([[buf[offset + i + j * ld] for j in range(cols)] for i in range(rows)])


def _emulate(args: tuple[int, ...], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """cublasGemmStridedBatchedEx with cuBLAS's A = our b, its B = our a."""
    transa, transb, m, n, k, lda, sa, ldb, sb, ldc, sc, count = args
    fa, fb = b.ravel(), a.ravel()
    c = np.zeros(count * sc)
    for i in range(count):
        ma = _column_major(fa, i * sa, *((k, m) if transa else (m, k)), lda)
        mb = _column_major(fb, i * sb, *((n, k) if transb else (k, n)), ldb)
        prod = (ma.T if transa else ma) @ (mb.T if transb else mb)
        for col in range(n):
            c[i * sc + col * ldc: i * sc + col * ldc + m] = prod[:, col]
    return c


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("batch_a, batch_b, batch", [
    ((), (), ()), ((3,), (3,), (3,)), ((2, 3), (), (2, 3)), ((), (2,), (2,)),
    ((1, 3), (3,), (1, 3)), ((3,), (), (3,)), ((2, 3), (1, 1), (2, 3))])
def test_row_major_product_of_transposed_and_batched_operands(
        ta: bool, tb: bool, batch_a: tuple[int, ...], batch_b: tuple[int, ...],
        batch: tuple[int, ...]) -> None:
    rng = np.random.default_rng(3)
    m, n, k = 4, 5, 3
    a = rng.standard_normal((*batch_a, *((k, m) if ta else (m, k))))
    b = rng.standard_normal((*batch_b, *((n, k) if tb else (k, n))))
    spec: dict[str, Any] = {"library": "cublas_dgemm", "m": m, "n": n, "k": k,
                            "transpose_a": ta, "transpose_b": tb, "batch": list(batch)}
    args = gemm_arguments(spec, a.shape, b.shape)
    want = np.matmul(np.swapaxes(a, -1, -2) if ta else a, np.swapaxes(b, -1, -2) if tb else b)
    np.testing.assert_allclose(_emulate(args, a, b), want.ravel(), rtol=1e-12)


def test_a_shared_weight_makes_one_gemm_of_all_rows() -> None:
    spec = {"library": "cublas_sgemm", "m": 4, "n": 5, "k": 3, "transpose_a": False,
            "transpose_b": True, "batch": [2, 3]}
    args = gemm_arguments(spec, (2, 3, 4, 3), (5, 3))
    assert args[3] == 24 and args[-1] == 1  # cuBLAS's n is our rows: 2 * 3 * 4


def test_partly_broadcast_batch_has_no_single_stride() -> None:
    assert batch_stride((4, 3), (2, 5)) == 0
    assert batch_stride((1, 1, 4, 3), (2, 5)) == 0
    assert batch_stride((2, 5, 4, 3), (2, 5)) == 12
    with pytest.raises(UnsupportedGemm, match="broadcasts partly"):
        batch_stride((2, 1, 4, 3), (2, 5))


def test_the_call_passes_our_b_as_cublas_a_with_its_stride() -> None:
    """DirectCublas.gemm's ctypes call, recorded, computes the plan's product."""
    from types import SimpleNamespace

    from fusec.runtime.cublas_direct import DirectCublas

    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2, 3, 4, 3)), rng.standard_normal((3, 5))
    recorded: list[tuple[Any, ...]] = []
    blas = DirectCublas.__new__(DirectCublas)
    blas.lib = SimpleNamespace(cublasGemmStridedBatchedEx=lambda *xs: recorded.append(xs) or 0)
    blas.handle, blas.tensor_ops, blas._stream = None, True, 7  # stream 7 already bound
    spec = {"library": "cublas_dgemm", "m": 4, "n": 5, "k": 3, "transpose_a": False,
            "transpose_b": False, "batch": [2, 3]}
    blas.gemm(spec, 0xA, a.shape, 0xB, b.shape, 0xC, 7)
    (call,) = recorded
    (_, transa, transb, m, n, k, _, pa, _, lda, sa, pb, _, ldb, sb, _, pc, _, ldc, sc, count,
     _, _) = call
    assert (pa, pb, pc) == (0xB, 0xA, 0xC)
    args = (transa, transb, m, n, k, lda, sa, ldb, sb, ldc, sc, count)
    np.testing.assert_allclose(_emulate(args, a, b), (a @ b).ravel(), rtol=1e-12)
