"""Library calls of a plan (`{"library": "cublas_sgemm", ...}` launches):
cuBLAS through CuPy, on the same stream as the kernels. Inside a CUDA-graph
capture, where CuPy refuses cuBLAS calls, they go straight to cuBLAS on a
handle of the graph runner's own (`runtime/cublas_direct.py`). A launch
that carries an epilogue (`bias`, `residual`, `activation`) is one cuBLASLt
matmul on both paths (`runtime/cublaslt.py`); should cuBLASLt refuse it
outside a capture, the plain GEMM runs and CuPy applies the epilogue (with a
warning naming cuBLASLt's status).

CuPy is optional: a plan that needs it fails with a clear message when it is
missing (recompile with `--gemm fused` to get a plan without library calls).
kernels.py never imports CuPy; only this module does, and only when a plan
holds a library launch.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Sequence
from typing import Any

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.program import KernelLaunch
from fusec.codegen.library_gemm import has_epilogue
from fusec.dialects.element_types import element
from fusec.runtime.arrays import device_pointer
from fusec.runtime.bf16_gemm import run_bf16_gemm


def _cupy() -> Any:
    try:
        return importlib.import_module("cupy")
    except ImportError:
        return None


def check_library(launch: KernelLaunch) -> None:
    """Fail early, naming the launch, when a library call cannot run here."""
    assert launch.library is not None
    if _cupy() is None:
        raise FusecError(
            f"the plan calls {launch.library['library']} (group {launch.group}), which needs "
            "CuPy: install cupy (pip install cupy-cuda12x), or compile with --gemm fused")


def external_stream(cp: Any, ptr: int) -> Any:
    """A CuPy stream object for the CUDA stream at `ptr` (numba's or torch's).

    CuPy 14 deprecates `ExternalStream` in favour of `Stream.from_external`,
    which wants an object speaking the `__cuda_stream__` protocol; the
    deprecated class still does exactly this, and works on every CuPy fusec
    supports, so its warning is silenced here, in one place."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "ExternalStream is deprecated", DeprecationWarning)
        return cp.cuda.ExternalStream(ptr)


def _as_cupy(cp: Any, a: Any) -> Any:
    return cp.asarray(a)  # numba device arrays: zero-copy through __cuda_array_interface__


def run_library_call(launch: KernelLaunch, args: Sequence[Any], stream: Any,
                     blas: Any = None) -> None:
    """`C = op(A) @ op(B)` (then its epilogue, when the launch carries
    one) on `stream`, written into the plan's C buffer: with CuPy, or,
    given `blas` (a `cublas_direct.DirectCublas`), straight through cuBLAS
    (cuBLASLt for an epilogue), which a graph capture can record (CuPy
    refuses)."""
    spec = launch.library
    assert spec is not None
    ptr = stream_pointer(stream)
    epilogue = has_epilogue(spec)
    if blas is not None:
        a, b, c = args[:3]
        if epilogue:
            _run_lt(blas.lt(), spec, args, ptr)
        else:
            blas.gemm(spec, device_pointer(a), a.shape, device_pointer(b), b.shape,
                      device_pointer(c), ptr)
        return
    cp = _cupy()
    assert cp is not None
    if epilogue and _lt_or_none(cp, spec, args, ptr):
        return
    ctx = external_stream(cp, ptr) if ptr else _NullContext()
    with ctx:
        a, b, c = (_as_cupy(cp, x) for x in args[:3])
        _gemm(cp, spec, a, b, c)
        if epilogue:
            _apply_epilogue(cp, spec, c, *(_as_cupy(cp, x) for x in args[3:]))


def _gemm(cp: Any, spec: dict[str, Any], a: Any, b: Any, c: Any) -> None:
    """`c = op(a) @ op(b)` with CuPy (bf16 bits through cuBLAS's gemmEx)."""
    if spec["library"] == element("bf16").library_gemm:  # uint16 bits: cuBLAS directly
        run_bf16_gemm(cp, spec, a, b, c)
        return
    if spec.get("transpose_a"):
        a = cp.swapaxes(a, -1, -2)
    if spec.get("transpose_b"):
        b = cp.swapaxes(b, -1, -2)
    if c.flags.c_contiguous and c.shape == _matmul_shape(a.shape, b.shape):
        cp.matmul(a, b, out=c)  # no temporary: nothing allocated, one kernel fewer
    else:
        c[...] = cp.matmul(a, b)


def _run_lt(lt: Any, spec: dict[str, Any], args: Sequence[Any], ptr: int) -> None:
    """The launch as one cuBLASLt matmul; its extra args are bias, then residual."""
    extra = iter(args[3:])
    bias = device_pointer(next(extra)) if "bias" in spec else 0
    residual = device_pointer(next(extra)) if "residual" in spec else 0
    a, b, c = args[:3]
    lt.matmul(spec, device_pointer(a), a.shape, device_pointer(b), b.shape, device_pointer(c),
              bias, residual, ptr)


_LT: dict[int, Any] = {}  # per device: the cuBLASLt handle of launches outside graphs
_LT_REFUSED: set[str] = set()  # the refusals already warned of


def _lt_or_none(cp: Any, spec: dict[str, Any], args: Sequence[Any], ptr: int) -> bool:
    """Run the launch through this process's cuBLASLt handle; False (after
    one warning per kind of refusal) when cuBLASLt refuses it."""
    from fusec.runtime.cublas_direct import UnsupportedGemm
    from fusec.runtime.cublaslt import CublasLt

    device = int(cp.cuda.Device().id)
    try:
        if device not in _LT:
            try:
                _LT[device] = CublasLt(cp)
            except (ImportError, OSError) as err:  # no libcublasLt to load
                raise UnsupportedGemm(f"cuBLASLt cannot be loaded: {err}") from err
        _run_lt(_LT[device], spec, args, ptr)
        return True
    except UnsupportedGemm as err:
        if str(err) not in _LT_REFUSED:
            _LT_REFUSED.add(str(err))
            warnings.warn(f"fusec: cuBLASLt refused a library GEMM's epilogue ({err}); "
                          "the GEMM and its epilogue run as two steps", stacklevel=2)
        return False


def _apply_epilogue(cp: Any, spec: dict[str, Any], c: Any, *extra: Any) -> None:
    """`c = act(c + residual + bias)` with CuPy, in f32 (cuBLASLt refused)."""
    from fusec.runtime.cublaslt import epilogue_values, from_stored, to_stored

    rest = iter(extra)
    bias = next(rest) if "bias" in spec else None
    residual = next(rest) if "residual" in spec else None
    values = epilogue_values(cp, spec, from_stored(cp, c),
                             None if bias is None else from_stored(cp, bias),
                             None if residual is None else from_stored(cp, residual))
    c[...] = to_stored(cp, values, c.dtype.type)


def _matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The shape `matmul` gives for operands of shapes `a` and `b` (both at least 2-D)."""
    batch = tuple(max(x, y) for x, y in zip(
        (1,) * (len(b) - len(a)) + a[:-2], (1,) * (len(a) - len(b)) + b[:-2], strict=True))
    return (*batch, a[-2], b[-1])


def stream_pointer(stream: Any) -> int:
    """The CUstream address of a numba stream (0: the default stream). numba
    0.6x keeps a ctypes handle (`.value`), numba-cuda a driver binding
    object (`int()`)."""
    handle = getattr(stream, "handle", None)
    if handle is None:
        return 0
    value = getattr(handle, "value", None)
    if isinstance(value, int):
        return value
    try:
        return int(handle)
    except (TypeError, ValueError):
        return 0


class _NullContext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
