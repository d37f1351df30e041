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


class _Host(np.ndarray):
    """A NumPy array that answers `.data.ptr` like a CuPy array."""

    @property
    def data(self) -> Any:  # type: ignore[override]
        from types import SimpleNamespace

        return SimpleNamespace(ptr=self.ctypes.data)


def _host_blas() -> Any:
    """A DirectCublas over host memory: CuPy is NumPy, and the cuBLAS call
    is `_emulate` reading and writing the buffers at the given addresses."""
    import ctypes
    from types import SimpleNamespace

    from fusec.runtime.cublas_direct import DirectCublas

    def buffer(ptr: int, n: int, dtype: Any) -> np.ndarray:
        raw = (ctypes.c_byte * (n * np.dtype(dtype).itemsize)).from_address(ptr)
        return np.frombuffer(raw, dtype=dtype)

    def gemm_ex(handle: Any, transa: int, transb: int, m: int, n: int, k: int, alpha: Any,
                pa: int, t: int, lda: int, sa: int, pb: int, _t: int, ldb: int, sb: int,
                beta: Any, pc: int, _c: int, ldc: int, sc: int, count: int, *rest: Any) -> int:
        dtype = {0: np.float32, 1: np.float64, 2: np.float16, 14: np.uint16}[t]
        args = (transa, transb, m, n, k, lda, sa, ldb, sb, ldc, sc, count)
        size_a = (count - 1) * sa + lda * (m if transa else k)
        size_b = (count - 1) * sb + ldb * (k if transb else n)
        a_ours, b_ours = buffer(pb, size_b, dtype), buffer(pa, size_a, dtype)
        if dtype is np.uint16:  # bf16 bits: f32 math, the result truncated to bf16
            a_ours, b_ours = ((x.astype(np.uint32) << 16).view(np.float32)
                              for x in (a_ours, b_ours))
            product = _emulate(args, a_ours, b_ours).astype(np.float32)
            buffer(pc, count * sc, dtype)[:] = (product.view(np.uint32) >> 16).astype(np.uint16)
            return 0
        buffer(pc, count * sc, dtype)[:] = _emulate(args, a_ours, b_ours)
        return 0

    def standard_normal(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return np.random.default_rng(0).standard_normal(shape, dtype=dtype).view(_Host)

    cupy = SimpleNamespace(
        random=SimpleNamespace(default_rng=lambda seed: SimpleNamespace(
            standard_normal=standard_normal)),
        matmul=np.matmul, swapaxes=np.swapaxes, abs=np.abs,
        empty=lambda shape, dtype: np.empty(shape, dtype).view(_Host),
        cuda=SimpleNamespace(Device=lambda: SimpleNamespace(synchronize=lambda: None),
                             runtime=SimpleNamespace(streamSynchronize=lambda s: None)))
    blas = DirectCublas.__new__(DirectCublas)
    blas.lib = SimpleNamespace(cublasGemmStridedBatchedEx=gemm_ex)
    blas.cupy, blas.handle, blas.tensor_ops, blas._stream = cupy, None, True, 0
    return blas


def test_verify_accepts_the_right_call_and_refuses_a_wrong_one(monkeypatch) -> None:
    from fusec.runtime import cublas_direct

    blas = _host_blas()
    spec = {"library": "cublas_sgemm", "m": 4, "n": 5, "k": 3, "transpose_a": True,
            "transpose_b": False, "batch": [2]}
    blas.verify(spec, (2, 3, 4), (3, 5), 0)
    right = cublas_direct.gemm_arguments

    def forgets_transpose_a(s: dict[str, Any], a: Any, b: Any) -> Any:
        return right({**s, "transpose_a": False}, a, b)

    monkeypatch.setattr(cublas_direct, "gemm_arguments", forgets_transpose_a)
    with pytest.raises(UnsupportedGemm, match="disagrees with CuPy's matmul"):
        blas.verify({**spec, "m": 3, "k": 3}, (2, 3, 3), (3, 5), 0)


def test_verify_runs_bf16_as_bits_compared_in_f32() -> None:
    """bf16 operands are uint16 bits: the direct call passes CUDA_R_16BF,
    and verify compares its result, widened, with an f32 product."""
    blas = _host_blas()
    spec = {"library": "cublas_gemm_ex_bf16", "m": 4, "n": 5, "k": 8, "transpose_a": False,
            "transpose_b": True, "batch": [3]}
    blas.verify(spec, (3, 4, 8), (5, 8), 0)
