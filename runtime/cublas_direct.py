"""cuBLAS called directly, on a handle of fusec's own, so that the library
GEMMs of a plan can be captured in a CUDA graph.

CuPy refuses every cuBLAS call while a stream is capturing (its
`cublas.setStream` raises `NotImplementedError`), so a model with library
GEMMs could not replay a graph. cuBLAS itself supports stream capture when
the handle's stream is the capturing stream and its workspace is a buffer
the user owns (`cublasSetWorkspace`): nothing is then allocated while
capturing. This module calls the same libcublas CuPy loaded, through
ctypes, with:

- one handle per runner, its own workspace (`WORKSPACE_BYTES`, allocated
  once), set again after each `cublasSetStream` (which resets it);
- `cublasGemmStridedBatchedEx` in row-major form (C^T = op(B)^T op(A)^T),
  the compute type CuPy would use for the dtype (so the numbers match the
  launches without graphs), alpha and beta read from host memory at
  capture time.

```python
blas = DirectCublas(cupy)
blas.gemm(launch.library, a_ptr, a_shape, b_ptr, b_shape, c_ptr, stream_ptr)
```

An operand whose batch dimensions broadcast only partly (neither all of
them nor none) has no single batch stride; such a GEMM raises
`UnsupportedGemm` and the model launches its kernels one by one, as
without this module.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Sequence
from typing import Any

import numpy as np

from fusec.codegen.library_gemm import has_epilogue
from fusec.dialects.element_types import of_device_dtype

# The cuBLAS guide recommends 32 MiB of workspace on Hopper (4 MiB before it).
WORKSPACE_BYTES = 32 * 1024 * 1024

_OP_N, _OP_T = 0, 1
_CUDA_R_32F, _CUDA_R_64F, _CUDA_R_16F, _CUDA_R_16BF = 0, 1, 2, 14
_COMPUTE_32F, _COMPUTE_32F_PEDANTIC, _COMPUTE_32F_FAST_TF32 = 68, 69, 77
_COMPUTE_64F, _COMPUTE_64F_PEDANTIC = 70, 71
_GEMM_DEFAULT, _GEMM_DEFAULT_TENSOR_OP = -1, 99
# CuPy's compute-type settings (cupy._core._routines_linalg).
_CUPY_PEDANTIC, _CUPY_TF32 = 2, 7

# library name -> (data type, NumPy dtype, whether the scalars are doubles)
_TYPES = {
    "cublas_sgemm": (_CUDA_R_32F, np.float32, False),
    "cublas_dgemm": (_CUDA_R_64F, np.float64, True),
    "cublas_gemm_ex_f16": (_CUDA_R_16F, np.float16, False),
    # bf16 tensors are uint16 bits in fusec's runtime (runtime/bf16_io.py)
    "cublas_gemm_ex_bf16": (_CUDA_R_16BF, np.uint16, False),
}


# Relative agreement `verify` asks of the direct call and CuPy's matmul, in
# multiples of the element type's `--check` tolerance (the two may pick
# different cuBLAS kernels; TF32 when CUPY_TF32 is set).
VERIFY_FACTOR = 2.0


class UnsupportedGemm(RuntimeError):
    """A library GEMM this module cannot express as one cuBLAS call."""


def batch_stride(shape: Sequence[int], batch: Sequence[int]) -> int:
    """The element stride between an operand's matrices across the result's
    `batch` dimensions: its matrix size when its batch is the result's, 0
    when it has no batch (broadcast whole); else `UnsupportedGemm`."""
    own = tuple(shape[:-2])
    if len(own) > len(batch):
        raise UnsupportedGemm(f"operand {tuple(shape)} has more batch dimensions than "
                              f"the result {tuple(batch)}")
    padded = (1,) * (len(batch) - len(own)) + own
    if int(np.prod(padded, dtype=np.int64)) == 1:
        return 0
    if padded == tuple(batch):
        return int(shape[-2]) * int(shape[-1])
    raise UnsupportedGemm(f"operand {tuple(shape)} broadcasts partly over batch {tuple(batch)}")


def gemm_arguments(spec: dict[str, Any], a_shape: Sequence[int], b_shape: Sequence[int]
                   ) -> tuple[int, int, int, int, int, int, int, int, int, int, int, int]:
    """cuBLAS's (transa, transb, m, n, k, lda, stride_a, ldb, stride_b, ldc,
    stride_c, batch count) for the row-major `C = op(A) @ op(B)` of `spec`,
    computed column-major as C^T = op(B)^T op(A)^T: cuBLAS's A is our B
    (its m our n), its B our A."""
    m, n, k = int(spec["m"]), int(spec["n"]), int(spec["k"])
    batch = [int(d) for d in spec.get("batch", [])]
    tb, ta = bool(spec.get("transpose_b")), bool(spec.get("transpose_a"))
    # B stored (k, n) is, column-major, B^T with leading dimension n; stored
    # (n, k) (transposed) it is B itself, leading dimension k: transpose it.
    transa, lda = (_OP_T, k) if tb else (_OP_N, n)
    transb, ldb = (_OP_T, m) if ta else (_OP_N, k)
    count = int(np.prod(batch, dtype=np.int64)) if batch else 1
    stride_a, stride_b = batch_stride(a_shape, batch), batch_stride(b_shape, batch)
    if count > 1 and stride_b == 0 and not ta and stride_a == m * k:
        # one B for every batch (a weight) and A's rows dense across the
        # batch: one GEMM of count * m rows instead of a batched one
        m, count, stride_a = m * count, 1, 0
    return (transa, transb, n, m, k, lda, stride_b, ldb, stride_a, n, m * n, count)


def find_libcublas() -> str | None:
    """The path of the libcublas already loaded in this process (CuPy's),
    so that one library serves both; None when none is loaded."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                path = line.rsplit(None, 1)[-1]
                name = path.rsplit("/", 1)[-1]
                if name.startswith("libcublas.so"):
                    return path
    except OSError:
        pass
    return ctypes.util.find_library("cublas")


class DirectCublas:
    """A cuBLAS handle with its own workspace, driven through ctypes."""

    def __init__(self, cupy: Any) -> None:
        import cupy_backends.cuda.libs.cublas  # noqa: F401  (loads CuPy's libcublas)

        path = find_libcublas()
        if path is None:
            raise UnsupportedGemm("libcublas is not loaded and was not found")
        self.lib = _bind(ctypes.CDLL(path))
        self.handle = ctypes.c_void_p()
        self._check(self.lib.cublasCreate_v2(ctypes.byref(self.handle)), "cublasCreate")
        self.workspace = cupy.empty(WORKSPACE_BYTES, dtype=np.uint8)
        self.cupy = cupy
        self.tensor_ops = int(cupy.cuda.Device().compute_capability) >= 80
        self._stream: int | None = None
        self._lt: Any = None

    def gemm(self, spec: dict[str, Any], a: int, a_shape: Sequence[int], b: int,
             b_shape: Sequence[int], c: int, stream: int) -> None:
        """Enqueue `c = op(a) @ op(b)` (row-major, as the plan's `spec` says)
        on `stream`; nothing is allocated, so it can be captured."""
        if spec["library"] not in _TYPES:
            raise UnsupportedGemm(f"no direct cuBLAS call for {spec['library']}")
        dtype, np_dtype, double = _TYPES[spec["library"]]
        (transa, transb, m, n, k, lda, sa, ldb, sb, ldc, sc, count) = gemm_arguments(
            spec, a_shape, b_shape)  # cuBLAS's names: its A is our b
        if m == 0 or n == 0 or count == 0:
            return
        if k == 0:  # an empty sum: C is zero (cuBLAS would only scale C by beta)
            self.cupy.cuda.runtime.memsetAsync(c, 0, count * sc * np.dtype(np_dtype).itemsize,
                                               stream)
            return
        self._use(stream)
        scalar = ctypes.c_double if double else ctypes.c_float
        one, zero = scalar(1.0), scalar(0.0)
        status = self.lib.cublasGemmStridedBatchedEx(
            self.handle, transa, transb, m, n, k, ctypes.byref(one),
            b, dtype, lda, sa, a, dtype, ldb, sb, ctypes.byref(zero),
            c, dtype, ldc, sc, count, self._compute_type(np_dtype),
            _GEMM_DEFAULT_TENSOR_OP if self.tensor_ops else _GEMM_DEFAULT)
        self._check(status, "cublasGemmStridedBatchedEx")

    def verify(self, spec: dict[str, Any], a_shape: Sequence[int], b_shape: Sequence[int],
               stream: int) -> None:
        """Run the GEMM of `spec` once on random operands of its shapes,
        outside any capture, against CuPy's matmul: cuBLAS's one-time set-up
        for these shapes is done before a capture records them, and a call
        that disagrees raises `UnsupportedGemm` instead of ever giving a
        wrong result in a graph. A launch with an epilogue is cuBLASLt's
        (`runtime/cublaslt.py`)."""
        if has_epilogue(spec):
            self.lt().verify(spec, a_shape, b_shape, stream)
            return
        cp = self.cupy
        _, np_dtype, _ = _TYPES.get(spec["library"], (0, np.float32, False))
        rng = cp.random.default_rng(0)
        a = rng.standard_normal(tuple(a_shape), dtype=np.float32).astype(np_dtype)
        b = rng.standard_normal(tuple(b_shape), dtype=np.float32).astype(np_dtype)
        if np_dtype is np.uint16:  # bf16 bits: random values, compared in f32
            a, b = (_bf16_bits(rng.standard_normal(tuple(s), dtype=np.float32))
                    for s in (a_shape, b_shape))
        fa, fb = (_bf16_values(x) if np_dtype is np.uint16 else x for x in (a, b))
        want = cp.matmul(cp.swapaxes(fa, -1, -2) if spec.get("transpose_a") else fa,
                         cp.swapaxes(fb, -1, -2) if spec.get("transpose_b") else fb)
        got = cp.empty(want.shape, np_dtype)
        cp.cuda.Device().synchronize()
        self.gemm(spec, int(a.data.ptr), a_shape, int(b.data.ptr), b_shape,
                  int(got.data.ptr), stream)
        cp.cuda.runtime.streamSynchronize(stream)
        if np_dtype is np.uint16:
            got = _bf16_values(got)
        scale = max(1.0, float(cp.abs(want).max())) if want.size else 1.0
        err = float(cp.abs(got.astype(np.float64) - want).max()) if want.size else 0.0
        if not err <= VERIFY_FACTOR * of_device_dtype(np.dtype(np_dtype).name).tolerance * scale:
            raise UnsupportedGemm(f"direct cuBLAS call for {spec['library']} disagrees with "
                                  f"CuPy's matmul (max error {err:.3g} at scale {scale:.3g})")

    def _use(self, stream: int) -> None:
        """Point the handle at `stream`, with our workspace (setStream resets it)."""
        if stream == self._stream:
            return
        self._check(self.lib.cublasSetStream_v2(self.handle, stream), "cublasSetStream")
        self._check(self.lib.cublasSetWorkspace_v2(
            self.handle, int(self.workspace.data.ptr), WORKSPACE_BYTES), "cublasSetWorkspace")
        self._stream = stream

    def _compute_type(self, dtype: type[np.generic]) -> int:
        return compute_type(dtype)

    def lt(self) -> Any:
        """This runner's cuBLASLt handle (`runtime/cublaslt.py`), made at
        the first launch that carries an epilogue."""
        if self._lt is None:
            from fusec.runtime.cublaslt import CublasLt

            self._lt = CublasLt(self.cupy)
        return self._lt

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            text = self.lib.cublasGetStatusString(status) if hasattr(
                self.lib, "cublasGetStatusString") else None
            raise UnsupportedGemm(f"{what} failed: "
                                  f"{text.decode() if text else f'status {status}'}")


def compute_type(dtype: type[np.generic]) -> int:
    """The compute type CuPy's matmul uses for `dtype` (CUPY_TF32 and
    pedantic settings included)."""
    try:
        from cupy._core import _routines_linalg

        setting = int(_routines_linalg.get_compute_type(np.dtype(dtype)))
    except Exception:
        setting = 0
    if dtype is np.float64:
        return _COMPUTE_64F_PEDANTIC if setting == _CUPY_PEDANTIC else _COMPUTE_64F
    if setting == _CUPY_PEDANTIC:
        return _COMPUTE_32F_PEDANTIC
    if setting == _CUPY_TF32 and dtype is np.float32:
        return _COMPUTE_32F_FAST_TF32
    return _COMPUTE_32F


def _bf16_bits(x: Any) -> Any:
    """float32 `x` (CuPy) as bf16 bits (truncated: random data only)."""
    return (x.view(np.uint32) >> 16).astype(np.uint16)


def _bf16_values(bits: Any) -> Any:
    """bf16 bits (CuPy uint16) as float32 values."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _bind(lib: Any) -> Any:
    """Argument types of the cuBLAS entry points used (64-bit strides, so
    nothing is truncated by ctypes' default int conversion)."""
    p, i, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
    lib.cublasCreate_v2.argtypes = [ctypes.POINTER(p)]
    lib.cublasSetStream_v2.argtypes = [p, p]
    lib.cublasSetWorkspace_v2.argtypes = [p, p, ctypes.c_size_t]
    lib.cublasGemmStridedBatchedEx.argtypes = [
        p, i, i, i, i, i, p, p, i, i, ll, p, i, i, ll, p, p, i, i, ll, i, i, i]
    for fn in ("cublasCreate_v2", "cublasSetStream_v2", "cublasSetWorkspace_v2",
               "cublasGemmStridedBatchedEx"):
        getattr(lib, fn).restype = i
    if hasattr(lib, "cublasGetStatusString"):
        lib.cublasGetStatusString.argtypes = [i]
        lib.cublasGetStatusString.restype = ctypes.c_char_p
    return lib
