"""bf16 library GEMMs (`{"library": "cublas_gemm_ex_bf16", ...}` launches).

fusec keeps a bf16 tensor in device memory as its uint16 bit patterns
(`dialects.element_types`), and CuPy multiplies bfloat16 only on ml_dtypes'
arrays. So this calls cuBLAS directly through CuPy's bindings
(`cupy.cuda.cublas`) on the buffers' pointers: `cublasGemmEx`, or
`cublasGemmStridedBatchedEx` for a batch, with CUDA_R_16BF A, B and C and
CUBLAS_COMPUTE_32F (f32 accumulation on the tensor cores, one rounding to
bf16 at the store, as a fused kernel rounds).

cuBLAS is column-major; a row-major C = A @ B is the column-major
C^T = B^T @ A^T, so the call passes B's buffer first. `gemm_ex_calls` does
that translation and the batch bookkeeping without touching CuPy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# cuBLAS / CUDA enumerators (cublas_api.h, library_types.h): ABI constants.
CUBLAS_OP_N = 0
CUBLAS_OP_T = 1
CUDA_R_16BF = 14
CUBLAS_COMPUTE_32F = 68
CUBLAS_GEMM_DEFAULT = -1
CUBLAS_POINTER_MODE_HOST = 0
_BF16_BYTES = 2


@dataclass(frozen=True)
class GemmExCall:
    """One cuBLAS call in column-major terms. `first` and `second` are the
    matrices cuBLAS calls A and B (fusec's B and A buffers); offsets are in
    elements from each buffer's start, strides in elements between the
    matrices of a batch (0: the same matrix for every batch entry)."""

    trans_first: int
    trans_second: int
    m: int
    n: int
    k: int
    ld_first: int
    ld_second: int
    ldc: int
    offsets: tuple[int, int, int]  # first (B buffer), second (A buffer), C
    strides: tuple[int, int, int]
    count: int  # batch entries (1: a plain gemmEx)


def _matrix_index(shape: Sequence[int], batch: Sequence[int]) -> np.ndarray:
    """For each entry of the result batch (flattened, row-major), the index
    of the operand's matrix it reads (operand batch dims broadcast as in
    NumPy)."""
    own = list(shape[:-2])
    own = [1] * (len(batch) - len(own)) + own
    index = np.arange(int(np.prod(own, dtype=np.int64)), dtype=np.int64).reshape(own)
    return np.broadcast_to(index, tuple(batch)).ravel()


def _uniform_stride(index: np.ndarray) -> int | None:
    """The constant step of `index` (None when it is not an arithmetic series)."""
    if index.size < 2:
        return 0
    step = int(index[1] - index[0])
    return step if bool(np.all(index == index[0] + step * np.arange(index.size))) else None


def gemm_ex_calls(spec: dict[str, Any], a_shape: Sequence[int],
                  b_shape: Sequence[int]) -> list[GemmExCall]:
    """The cuBLAS calls computing the plan's `C = op(A) @ op(B)` on row-major
    buffers of shapes `a_shape`, `b_shape` (before the transpose flags): one
    call when every operand's matrices are evenly spaced over the batch
    (strided batched when the batch has several entries), else one gemmEx
    per batch entry (operands broadcast along some batch dims only)."""
    m, n, k = int(spec["m"]), int(spec["n"]), int(spec["k"])
    if m == 0 or n == 0:
        return []
    ta, tb = bool(spec["transpose_a"]), bool(spec["transpose_b"])
    batch = [int(d) for d in spec["batch"]]
    if 0 in batch:
        return []
    sizes = (int(np.prod(b_shape[-2:])), int(np.prod(a_shape[-2:])), m * n)
    index = (_matrix_index(b_shape, batch), _matrix_index(a_shape, batch),
             np.arange(int(np.prod(batch, dtype=np.int64)), dtype=np.int64))

    def call(offsets: tuple[int, int, int], strides: tuple[int, int, int],
             count: int) -> GemmExCall:
        return GemmExCall(CUBLAS_OP_T if tb else CUBLAS_OP_N, CUBLAS_OP_T if ta else CUBLAS_OP_N,
                          n, m, k, k if tb else n, m if ta else k, n, offsets, strides, count)

    steps = [_uniform_stride(i) for i in index]
    if all(s is not None for s in steps):
        strides = tuple(int(s) * size for s, size in zip(steps, sizes, strict=True))
        first = tuple(int(i[0]) * size if i.size else 0 for i, size in zip(index, sizes,
                                                                           strict=True))
        return [call(first, strides, int(index[2].size))]  # type: ignore[arg-type]
    return [call((int(ib) * sizes[0], int(ia) * sizes[1], int(ic) * sizes[2]), (0, 0, 0), 1)
            for ib, ia, ic in zip(*index, strict=True)]


def _pointer(x: Any) -> int:
    return int(x.data.ptr)


def run_bf16_gemm(cp: Any, spec: dict[str, Any], a: Any, b: Any, c: Any) -> None:
    """Compute the plan's bf16 GEMM into `c` with cuBLAS on CuPy's current
    stream (CuPy's bindings set it on the handle). `a`, `b`, `c` are CuPy
    arrays over the uint16 buffers."""
    cublas = cp.cuda.cublas
    handle = cp.cuda.device.get_cublas_handle()
    one = np.ones(1, dtype=np.float32)  # alpha and beta: host scalars, read at the call
    zero = np.zeros(1, dtype=np.float32)
    pointers = (_pointer(b), _pointer(a), _pointer(c))
    mode = cublas.getPointerMode(handle)  # CuPy's own routines may have left it on device
    cublas.setPointerMode(handle, CUBLAS_POINTER_MODE_HOST)
    try:
        for g in gemm_ex_calls(spec, a.shape, b.shape):
            _issue(cublas, handle, g, pointers, one.ctypes.data, zero.ctypes.data)
    finally:
        cublas.setPointerMode(handle, mode)


def _issue(cublas: Any, handle: int, g: GemmExCall, pointers: tuple[int, int, int],
           alpha: int, beta: int) -> None:
    """One cublasGemmEx or cublasGemmStridedBatchedEx."""
    pa, pb, pc = (p + o * _BF16_BYTES for p, o in zip(pointers, g.offsets, strict=True))
    if g.count == 1:
        cublas.gemmEx(handle, g.trans_first, g.trans_second, g.m, g.n, g.k, alpha,
                      pa, CUDA_R_16BF, g.ld_first, pb, CUDA_R_16BF, g.ld_second, beta,
                      pc, CUDA_R_16BF, g.ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
    else:
        cublas.gemmStridedBatchedEx(
            handle, g.trans_first, g.trans_second, g.m, g.n, g.k, alpha,
            pa, CUDA_R_16BF, g.ld_first, g.strides[0],
            pb, CUDA_R_16BF, g.ld_second, g.strides[1], beta,
            pc, CUDA_R_16BF, g.ldc, g.strides[2], g.count,
            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)
