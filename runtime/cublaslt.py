"""Library GEMMs whose launch carries an epilogue (`bias`, `residual`,
`activation`: `codegen/library_gemm.py`), run as one cuBLASLt matmul:

    D = act(op(A) op(B) + C + bias)        (alpha = 1; beta = 1 with a residual C, else 0)

cuBLASLt is driven through ctypes on a handle of fusec's own with a
workspace it owns (`WORKSPACE_BYTES`, allocated once): nothing is allocated
per call, so a CUDA-graph capture can record the call (CuPy refuses cuBLAS
calls while capturing; `runtime/cublas_direct.py` says why this works).
The library is the libcublasLt that CuPy's libcublas loads (libcublas
links it), found as `cublas_direct.find_libcublas` finds libcublas.

Row-major as in `cublas_direct`: the row-major `D = op(A) op(B)` is the
column-major `D^T = op(B)^T op(A)^T`, so cuBLASLt's A is our B and its D has
our N as its rows. cuBLASLt adds the bias per row of its (column-major) D
("Bias vector length must match matrix D rows count"), i.e. per output
feature along our last axis, which is the bias fusec folds. The bias has
D's type (the default of CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE) and, across a
batch, one vector for every entry (CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE
left at its default 0).

Enum values, attribute types and the heuristic result's layout are those of
cublasLt.h (cuBLAS 11.x / 12.x; cuBLAS documentation, "cuBLASLt API
Reference": cublasLtMatmulDescAttributes_t, cublasLtMatrixLayoutAttribute_t,
cublasLtMatmulPreferenceAttributes_t, cublasLtEpilogue_t,
cublasLtMatmulHeuristicResult_t) and of cublas_api.h / library_types.h
(cublasStatus_t, cublasComputeType_t, cudaDataType_t).

```python
lt = CublasLt(cupy)
lt.matmul(launch.library, a_ptr, a_shape, b_ptr, b_shape, d_ptr, bias_ptr, residual_ptr,
          stream_ptr)
```
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fusec.dialects.element_types import of_device_dtype
from fusec.runtime.cublas_direct import (
    VERIFY_FACTOR,
    WORKSPACE_BYTES,
    UnsupportedGemm,
    compute_type,
    find_libcublas,
    gemm_arguments,
)

# cudaDataType_t (library_types.h)
_CUDA_R_32F, _CUDA_R_16F, _CUDA_R_16BF = 0, 2, 14
# cublasLtMatmulDescAttributes_t
_DESC_TRANSA, _DESC_TRANSB, _DESC_EPILOGUE, _DESC_BIAS_POINTER = 3, 4, 7, 8
# cublasLtMatrixLayoutAttribute_t
_LAYOUT_BATCH_COUNT, _LAYOUT_STRIDED_BATCH_OFFSET = 5, 6
# cublasLtMatmulPreferenceAttributes_t
_PREF_MAX_WORKSPACE_BYTES = 1
_PREF_MIN_ALIGNMENT = {"a": 5, "b": 6, "c": 7, "d": 8}  # MIN_ALIGNMENT_{A,B,C,D}_BYTES
# cublasLtEpilogue_t: (bias, activation) -> value
EPILOGUES = {
    (False, None): 1,  # CUBLASLT_EPILOGUE_DEFAULT
    (False, "relu"): 2,  # CUBLASLT_EPILOGUE_RELU
    (True, None): 4,  # CUBLASLT_EPILOGUE_BIAS
    (True, "relu"): 6,  # CUBLASLT_EPILOGUE_RELU_BIAS
    (False, "gelu_tanh"): 32,  # CUBLASLT_EPILOGUE_GELU (the tanh approximation)
    (True, "gelu_tanh"): 36,  # CUBLASLT_EPILOGUE_GELU_BIAS
}
# cublasStatus_t (cublas_api.h), named in every error
STATUS_NAMES = {
    0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED",
    3: "CUBLAS_STATUS_ALLOC_FAILED", 7: "CUBLAS_STATUS_INVALID_VALUE",
    8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
    13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR",
    15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR",
}
# library name -> (data type, NumPy dtype of the buffers)
_TYPES = {
    "cublas_sgemm": (_CUDA_R_32F, np.float32),
    "cublas_gemm_ex_f16": (_CUDA_R_16F, np.float16),
    "cublas_gemm_ex_bf16": (_CUDA_R_16BF, np.uint16),  # bf16 bits (runtime/bf16_io.py)
}
_MAX_ALIGNMENT = 256  # cuBLASLt's default minimum alignment preference


def status_name(status: int) -> str:
    """`CUBLAS_STATUS_NOT_SUPPORTED (15)` for a cublasStatus_t."""
    return f"{STATUS_NAMES.get(status, 'unknown status')} ({status})"


@dataclass(frozen=True)
class Layout:
    """A cuBLASLt matrix layout: column-major rows x cols, leading dimension
    `ld`, `stride` elements between the matrices of a batch."""

    rows: int
    cols: int
    ld: int
    stride: int


@dataclass(frozen=True)
class LtProblem:
    """One cuBLASLt matmul in its own (column-major) terms: its A is our B."""

    transa: int
    transb: int
    a: Layout
    b: Layout
    d: Layout  # C (the residual) has the same layout
    count: int
    epilogue: int

    @property
    def empty(self) -> bool:
        return 0 in (self.d.rows, self.d.cols, self.count)


def lt_problem(spec: dict[str, Any], a_shape: Sequence[int], b_shape: Sequence[int]
               ) -> LtProblem:
    """The cuBLASLt description of the plan's library launch `spec` on
    row-major operands of shapes `a_shape`, `b_shape` (the arguments of
    `cublas_direct.gemm_arguments`, as layouts)."""
    (transa, transb, m, n, k, lda, sa, ldb, sb, ldc, sc, count) = gemm_arguments(
        spec, a_shape, b_shape)
    act = spec.get("activation")
    if (bool(spec.get("bias")), act) not in EPILOGUES:
        raise UnsupportedGemm(f"no cuBLASLt epilogue for activation {act!r}")
    a = Layout(k, m, lda, sa) if transa else Layout(m, k, lda, sa)
    b = Layout(n, k, ldb, sb) if transb else Layout(k, n, ldb, sb)
    return LtProblem(transa, transb, a, b, Layout(m, n, ldc, sc), count,
                     EPILOGUES[(bool(spec.get("bias")), act)])


def alignment(ptr: int) -> int:
    """The largest power of two (at most 256) dividing the address."""
    return _MAX_ALIGNMENT if ptr == 0 else min(_MAX_ALIGNMENT, ptr & -ptr)


class _HeuristicResult(ctypes.Structure):
    """cublasLtMatmulHeuristicResult_t: cublasLtMatmulAlgo_t (uint64_t
    data[8]), size_t workspaceSize, cublasStatus_t state, float wavesCount,
    int reserved[4]: 96 bytes."""

    _fields_ = [("algo", ctypes.c_uint64 * 8), ("workspace_size", ctypes.c_size_t),
                ("state", ctypes.c_int), ("waves_count", ctypes.c_float),
                ("reserved", ctypes.c_int * 4)]


@dataclass
class _Plan:
    """The descriptors and algorithm of one problem (kept for the handle's life)."""

    desc: ctypes.c_void_p
    layouts: tuple[ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]  # A, B, C/D
    algo: _HeuristicResult


class CublasLt:
    """A cuBLASLt handle with its own workspace, driven through ctypes."""

    def __init__(self, cupy: Any) -> None:
        import cupy_backends.cuda.libs.cublas  # noqa: F401  (loads CuPy's libcublas and Lt)

        path = find_libcublaslt()
        if path is None:
            raise UnsupportedGemm("libcublasLt is not loaded and was not found")
        self.lib = _bind(ctypes.CDLL(path))
        self.handle = ctypes.c_void_p()
        self._check(self.lib.cublasLtCreate(ctypes.byref(self.handle)), "cublasLtCreate")
        self.workspace = cupy.empty(WORKSPACE_BYTES, dtype=np.uint8)
        self.cupy = cupy
        self._plans: dict[tuple[Any, ...], _Plan] = {}
        self._one, self._zero = ctypes.c_float(1.0), ctypes.c_float(0.0)

    def matmul(self, spec: dict[str, Any], a: int, a_shape: Sequence[int], b: int,
               b_shape: Sequence[int], d: int, bias: int, residual: int, stream: int) -> None:
        """Enqueue the launch's `D = act(op(A) op(B) + residual + bias)` on
        `stream` (`bias`, `residual`: 0 when absent); nothing is allocated
        after the first call of a shape, so it can be captured."""
        if spec["library"] not in _TYPES:
            raise UnsupportedGemm(f"no cuBLASLt call for {spec['library']}")
        problem = lt_problem(spec, a_shape, b_shape)
        if problem.empty:
            return
        if int(spec["k"]) == 0:
            raise UnsupportedGemm("cuBLASLt epilogue of an empty sum (k = 0)")
        c = residual or d
        plan = self._plan(spec, problem, (b, a, c, d), bias)
        if bias:
            self._set_desc(plan.desc, _DESC_BIAS_POINTER, ctypes.c_void_p(bias))
        status = self.lib.cublasLtMatmul(
            self.handle, plan.desc, ctypes.byref(self._one), b, plan.layouts[0], a,
            plan.layouts[1], ctypes.byref(self._one if residual else self._zero),
            c, plan.layouts[2], d, plan.layouts[2], ctypes.byref(plan.algo.algo),
            int(self.workspace.data.ptr), WORKSPACE_BYTES, stream)
        self._check(status, "cublasLtMatmul")

    def verify(self, spec: dict[str, Any], a_shape: Sequence[int], b_shape: Sequence[int],
               stream: int) -> float:
        """Run the launch once on random operands of its shapes, outside any
        capture, against CuPy (`epilogue_values`): the heuristic and
        cuBLASLt's set-up for the shape happen before a capture records
        the call, and a call that disagrees raises `UnsupportedGemm` (naming
        the error) instead of ever giving a wrong result. The max error
        relative to the result's scale."""
        cp = self.cupy
        _, np_dtype = _TYPES[spec["library"]]
        rng = cp.random.default_rng(0)
        out = (*[int(x) for x in spec["batch"]], int(spec["m"]), int(spec["n"]))
        shapes = {"a": tuple(a_shape), "b": tuple(b_shape), "bias": (int(spec["n"]),),
                  "residual": out}
        values = {k: rng.standard_normal(v, dtype=np.float32) for k, v in shapes.items()}
        stored = {k: to_stored(cp, v, np_dtype) for k, v in values.items()}
        values = {k: from_stored(cp, v) for k, v in stored.items()}  # as rounded
        a, b = values["a"], values["b"]
        product = cp.matmul(cp.swapaxes(a, -1, -2) if spec.get("transpose_a") else a,
                            cp.swapaxes(b, -1, -2) if spec.get("transpose_b") else b)
        want = epilogue_values(cp, spec, product, values["bias"], values["residual"])
        got = cp.zeros(out, np_dtype)
        cp.cuda.Device().synchronize()
        ptr = {k: int(v.data.ptr) for k, v in stored.items()}
        self.matmul(spec, ptr["a"], a_shape, ptr["b"], b_shape, int(got.data.ptr),
                    ptr["bias"] if "bias" in spec else 0,
                    ptr["residual"] if "residual" in spec else 0, stream)
        cp.cuda.runtime.streamSynchronize(stream)
        scale = max(1.0, float(cp.abs(want).max())) if want.size else 1.0
        err = float(cp.abs(from_stored(cp, got) - want).max()) / scale if want.size else 0.0
        if not err <= VERIFY_FACTOR * tolerance(spec):
            raise UnsupportedGemm(f"cuBLASLt call for {spec['library']} with epilogue "
                                  f"{epilogue_name(spec)} disagrees with CuPy "
                                  f"(max relative error {err:.3g})")
        return err

    def _plan(self, spec: dict[str, Any], p: LtProblem, ptrs: tuple[int, int, int, int],
              bias: int) -> _Plan:
        """The cached descriptors and heuristic's algorithm for this problem
        and these pointers' alignments (the heuristic assumes them)."""
        dtype, np_dtype = _TYPES[spec["library"]]
        aligns = tuple(alignment(x) for x in (*ptrs, bias))
        key = (spec["library"], p, aligns)
        if key in self._plans:
            return self._plans[key]
        desc = ctypes.c_void_p()
        self._check(self.lib.cublasLtMatmulDescCreate(
            ctypes.byref(desc), compute_type(np_dtype if np_dtype is not np.uint16
                                             else np.float16), _CUDA_R_32F),
            "cublasLtMatmulDescCreate")
        self._set_desc(desc, _DESC_TRANSA, ctypes.c_int32(p.transa))
        self._set_desc(desc, _DESC_TRANSB, ctypes.c_int32(p.transb))
        self._set_desc(desc, _DESC_EPILOGUE, ctypes.c_uint32(p.epilogue))
        if bias:  # the heuristic reads the pointer's alignment
            self._set_desc(desc, _DESC_BIAS_POINTER, ctypes.c_void_p(bias))
        layouts = tuple(self._layout(dtype, x, p.count) for x in (p.a, p.b, p.d))
        plan = _Plan(desc, layouts, self._heuristic(desc, layouts, aligns))  # type: ignore[arg-type]
        self._plans[key] = plan
        return plan

    def _layout(self, dtype: int, x: Layout, count: int) -> ctypes.c_void_p:
        layout = ctypes.c_void_p()
        self._check(self.lib.cublasLtMatrixLayoutCreate(ctypes.byref(layout), dtype, x.rows,
                                                         x.cols, x.ld),
                    "cublasLtMatrixLayoutCreate")
        if count > 1:
            for attr, value in ((_LAYOUT_BATCH_COUNT, ctypes.c_int32(count)),
                                (_LAYOUT_STRIDED_BATCH_OFFSET, ctypes.c_int64(x.stride))):
                self._check(self.lib.cublasLtMatrixLayoutSetAttribute(
                    layout, attr, ctypes.byref(value), ctypes.sizeof(value)),
                    "cublasLtMatrixLayoutSetAttribute")
        return layout

    def _heuristic(self, desc: ctypes.c_void_p, layouts: tuple[ctypes.c_void_p, ...],
                   aligns: tuple[int, ...]) -> _HeuristicResult:
        """cuBLASLt's best algorithm within our workspace, for these alignments."""
        pref = ctypes.c_void_p()
        self._check(self.lib.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)),
                    "cublasLtMatmulPreferenceCreate")
        try:
            values = [(_PREF_MAX_WORKSPACE_BYTES, ctypes.c_uint64(WORKSPACE_BYTES))]
            values += [(_PREF_MIN_ALIGNMENT[k], ctypes.c_uint32(v))
                       for k, v in zip("abcd", aligns[:4], strict=True)]
            for attr, value in values:
                self._check(self.lib.cublasLtMatmulPreferenceSetAttribute(
                    pref, attr, ctypes.byref(value), ctypes.sizeof(value)),
                    "cublasLtMatmulPreferenceSetAttribute")
            result, found = _HeuristicResult(), ctypes.c_int(0)
            a, b, d = layouts
            self._check(self.lib.cublasLtMatmulAlgoGetHeuristic(
                self.handle, desc, a, b, d, d, pref, 1, ctypes.byref(result),
                ctypes.byref(found)), "cublasLtMatmulAlgoGetHeuristic")
        finally:
            self.lib.cublasLtMatmulPreferenceDestroy(pref)
        if found.value < 1 or result.state != 0:
            raise UnsupportedGemm("cublasLtMatmulAlgoGetHeuristic found no algorithm "
                                  f"(state {status_name(result.state)})")
        return result

    def _set_desc(self, desc: ctypes.c_void_p, attr: int, value: Any) -> None:
        self._check(self.lib.cublasLtMatmulDescSetAttribute(
            desc, attr, ctypes.byref(value), ctypes.sizeof(value)),
            f"cublasLtMatmulDescSetAttribute({attr})")

    def _check(self, status: int, what: str) -> None:
        if status != 0:
            raise UnsupportedGemm(f"{what} failed: {status_name(status)}")


def find_libcublaslt() -> str | None:
    """The libcublasLt loaded in this process (by CuPy's libcublas), else
    the one beside that libcublas, else the system's."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                path = line.rsplit(None, 1)[-1]
                if path.rsplit("/", 1)[-1].startswith("libcublasLt.so"):
                    return path
    except OSError:
        pass
    blas = find_libcublas()
    if blas and "/" in blas:
        folder, name = blas.rsplit("/", 1)
        candidate = f"{folder}/{name.replace('libcublas', 'libcublasLt', 1)}"
        if os.path.exists(candidate):
            return candidate
    import ctypes.util

    return ctypes.util.find_library("cublasLt")


def _bind(lib: Any) -> Any:
    """Argument types of the cuBLASLt entry points used (cublasLt.h)."""
    p, i, u64, i64, size = (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_int64,
                            ctypes.c_size_t)
    pp = ctypes.POINTER(p)
    signatures = {
        "cublasLtCreate": [pp],
        "cublasLtMatmulDescCreate": [pp, i, i],
        "cublasLtMatmulDescSetAttribute": [p, i, p, size],
        "cublasLtMatrixLayoutCreate": [pp, i, u64, u64, i64],
        "cublasLtMatrixLayoutSetAttribute": [p, i, p, size],
        "cublasLtMatmulPreferenceCreate": [pp],
        "cublasLtMatmulPreferenceDestroy": [p],
        "cublasLtMatmulPreferenceSetAttribute": [p, i, p, size],
        "cublasLtMatmulAlgoGetHeuristic": [p, p, p, p, p, p, p, i, p, ctypes.POINTER(i)],
        "cublasLtMatmul": [p, p, p, p, p, p, p, p, p, p, p, p, p, p, size, p],
    }
    for name, args in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, i
    return lib


def epilogue_name(spec: dict[str, Any]) -> str:
    """`bias+residual+gelu_tanh`: the launch's epilogue, for messages."""
    parts = [k for k in ("bias", "residual") if k in spec]
    return "+".join([*parts, *([spec["activation"]] if "activation" in spec else [])]) or "none"


def epilogue_values(xp: Any, spec: dict[str, Any], product: Any, bias: Any,
                    residual: Any) -> Any:
    """`act(product + residual + bias)` in f32 (`xp`: NumPy or CuPy), the
    launch's epilogue as cuBLASLt computes it before rounding to D's type."""
    y = product.astype(np.float32)
    if "residual" in spec:
        y = y + residual.reshape(y.shape).astype(np.float32)
    if "bias" in spec:
        y = y + bias.reshape(-1).astype(np.float32)
    act = spec.get("activation")
    if act == "relu":
        y = xp.maximum(y, np.float32(0))
    elif act == "gelu_tanh":
        inner = np.float32(np.sqrt(2.0 / np.pi)) * (y + np.float32(0.044715) * y * y * y)
        y = np.float32(0.5) * y * (np.float32(1) + xp.tanh(inner))
    return y


def to_stored(xp: Any, x: Any, dtype: Any) -> Any:
    """f32 values in a buffer's dtype (bf16: uint16 bits, rounded to nearest even)."""
    if dtype is not np.uint16:
        return x.astype(dtype)
    bits = x.astype(np.float32).view(np.uint32)
    return ((bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
            >> np.uint32(16)).astype(np.uint16)


def from_stored(xp: Any, x: Any) -> Any:
    """A buffer's values as f32 (bf16 bits widened)."""
    if x.dtype == np.uint16:
        return (x.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return x.astype(np.float32)


def tolerance(spec: dict[str, Any]) -> float:
    """The `--check` tolerance of the launch's element type."""
    return of_device_dtype(np.dtype(_TYPES[spec["library"]][1]).name).tolerance
