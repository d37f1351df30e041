"""Every fact fusec knows about an element type, in one table.

A row says how an element is stored (bytes, NumPy dtype on the host, NumPy
dtype in device memory, numba type in generated code), how kernels compute
with it (the numba type arithmetic runs in, and the prelude functions that
widen a loaded element and round a result back to storage), whether the
library GEMM (cuBLAS through CuPy) takes it, and how exact it is (unit
roundoff, the fusion precision gate's drift bound, the `--check` tolerance).

bf16 has no NumPy dtype. On the host (the reference interpreter, the
runtime's NumPy inputs and outputs) a bf16 tensor is a float32 array whose
values are bf16 values (`reference_ops.round_to_bf16`); in device memory it
is the uint16 bit pattern, widened in registers by `bf16_to_f32` and rounded
to nearest even by `f32_to_bf16` (both in the kernel prelude).

Every other module reads these rows; `tests/test_element_types.py` fails
when another table of these facts appears.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ElementType:
    """One element type's facts (see the module docstring)."""

    name: str  # as written in a tensor type: "f32", "bf16", "i1"
    width: int  # bytes per element in memory
    host_dtype: str  # NumPy dtype name of host arrays (bf16: float32 stand-in)
    device_dtype: str  # NumPy dtype name of device buffers (bf16: uint16 bits)
    numba_type: str  # numba type name of a stored element in generated code
    compute_type: str  # numba type name arithmetic runs in (halves: float32)
    widen: str  # callable text: stored element -> compute type ("" when equal)
    narrow: str  # callable text: compute value -> stored element ("" when equal)
    # The plan's name of the library GEMM (cuBLAS through CuPy, f32
    # accumulation for halves) that computes matmuls of it; "" for none.
    # bf16's calls cublasGemmEx on the uint16 buffers (runtime/bf16_gemm.py):
    # CuPy's matmul needs ml_dtypes' bfloat16, which fusec does not require.
    library_gemm: str
    # The plan's name of the library convolution (cuDNN, f32 accumulation for
    # halves, runtime/cudnn_conv.py) of it; "" for none.
    library_conv: str
    unit_roundoff: float  # 0.0 for exact (integer, boolean) types
    tau: float  # the fusion precision gate's relative drift bound (0.0: exact)
    tolerance: float  # `--check` / test tolerance relative to max |reference|
    torch_name: str  # attribute of the `torch` module naming its dtype

    @property
    def is_float(self) -> bool:
        """A floating-point type."""
        return self.name.startswith(("f", "bf"))

    @property
    def is_half(self) -> bool:
        """A 16-bit float, computed in float32 and rounded at every store."""
        return self.is_float and self.width == 2


def _float(name: str, width: int, host: str, device: str, numba: str, compute: str,
           widen: str, narrow: str, library: str, mantissa: int, tau: float,
           tolerance: float, torch_name: str) -> ElementType:
    return ElementType(name, width, host, device, numba, compute, widen, narrow, library,
                       f"cudnn_conv_{name}", 2.0 ** -(mantissa + 1), tau, tolerance, torch_name)


def _exact(name: str, width: int, dtype: str, numba: str) -> ElementType:
    return ElementType(name, width, dtype, dtype, numba, numba, "", "", "", "", 0.0, 0.0, 0.0,
                       dtype)


# Tolerances: float32 kernels may reorder sums and use fused multiply-adds,
# so they differ from a float64 oracle by a few ulps times the reduction
# depth; a GPT-2 block at full size (K = 3072 after K = 768, random weights)
# differs by 1.7e-4 on the H200, fused or not, which sets the f32 bound. The
# half bounds are some unit roundoffs of rounded intermediates: whole models
# differ from eager by the same count of their own unit roundoff in f16 and
# bf16 (BERT-base, 12 layers, through torch.compile on an H100: f16 2.8e-3,
# 5.7 u; bf16 2.2e-2, 5.6 u), so both bounds are about 10-20 u.
ELEMENT_TYPES: tuple[ElementType, ...] = (
    _float("f64", 8, "float64", "float64", "float64", "float64", "", "", "cublas_dgemm", 52,
           1e-12, 1e-9, "float64"),
    _float("f32", 4, "float32", "float32", "float32", "float32", "", "", "cublas_sgemm", 23,
           1e-5, 5e-4, "float32"),
    _float("f16", 2, "float16", "float16", "float16", "float32", "float32", "float16",
           "cublas_gemm_ex_f16", 10, 1e-2, 1e-2, "float16"),
    _float("bf16", 2, "float32", "uint16", "uint16", "float32", "bf16_to_f32", "f32_to_bf16",
           "cublas_gemm_ex_bf16", 7, 5e-2, 4e-2, "bfloat16"),
    _exact("i1", 1, "bool", "boolean"),
    _exact("i8", 1, "int8", "int8"),
    _exact("i16", 2, "int16", "int16"),
    _exact("i32", 4, "int32", "int32"),
    _exact("i64", 8, "int64", "int64"),
)

BY_NAME: dict[str, ElementType] = {e.name: e for e in ELEMENT_TYPES}
# The device dtype names code generation and the runtime key on. uint16 is
# bf16: the language has no 16-bit unsigned integer type.
BY_DEVICE_DTYPE: dict[str, ElementType] = {e.device_dtype: e for e in ELEMENT_TYPES}
FLOAT_NAMES = frozenset(e.name for e in ELEMENT_TYPES if e.is_float)
HALF_NAMES = frozenset(e.name for e in ELEMENT_TYPES if e.is_half)


def element(name: str) -> ElementType:
    """The row of element type `name` (KeyError for one fusec does not know)."""
    return BY_NAME[name]


def of_device_dtype(dtype: str) -> ElementType:
    """The row whose device buffers have NumPy dtype name `dtype`."""
    return BY_DEVICE_DTYPE[dtype]


def numba_width(numba_type: str) -> int:
    """Bytes of a value of numba type name `numba_type` (a compute type such
    as "float32" or "boolean") staged in shared memory."""
    return next(e.width for e in ELEMENT_TYPES if e.numba_type == numba_type)


def of_host_dtype(dtype: str) -> ElementType | None:
    """The row a host array of NumPy dtype name `dtype` holds (float32 is
    f32, never the bf16 stand-in; "bfloat16", a torch or ml_dtypes name, is
    bf16)."""
    if dtype == "bfloat16":
        return BY_NAME["bf16"]
    return next((e for e in ELEMENT_TYPES if e.host_dtype == dtype and e.name != "bf16"),
                None)


def host_numpy_dtype(name: str) -> type[np.generic]:
    """The NumPy scalar type of host arrays of element type `name`."""
    return np.dtype(BY_NAME[name].host_dtype).type


def tau(name: str) -> float:
    """The fusion precision gate's drift bound for element type `name`
    (0.0, exact, for integer, boolean and unknown types)."""
    row = BY_NAME.get(name)
    return row.tau if row is not None else 0.0


def skipped_rounding(name: str) -> float:
    """The error one rounding to `name` adds when a fused kernel keeps the
    value in f32 registers instead: a half type's unit roundoff, else 0.0."""
    row = BY_NAME.get(name)
    return row.unit_roundoff if row is not None and row.is_half else 0.0


def smallest_normal(compute_type: str) -> float | None:
    """The smallest positive normal value of float compute type `compute_type`
    (a numba/NumPy name: "float32", "float64"), whose reciprocal is the
    largest finite one; None for a type that is not a float compute type."""
    row = BY_DEVICE_DTYPE.get(compute_type)
    if row is None or not row.is_float or row.compute_type != compute_type:
        return None
    return float(np.finfo(np.dtype(compute_type)).smallest_normal)


def tolerance_of(dtype: str) -> float:
    """The `--check` tolerance of a host array of NumPy dtype name `dtype`
    (f32's for one that is not a float type of the table)."""
    row = of_host_dtype(dtype)
    return row.tolerance if row is not None and row.is_float else BY_NAME["f32"].tolerance


def unit_roundoff_of(dtype: str) -> float:
    """The unit roundoff of a host array of NumPy dtype name `dtype` (f32's
    for one that is not a float type of the table)."""
    row = of_host_dtype(dtype)
    return row.unit_roundoff if row is not None and row.is_float else \
        BY_NAME["f32"].unit_roundoff


def round_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round to the nearest bfloat16 (ties to even), returned as float32."""
    f32 = np.ascontiguousarray(x, dtype=np.float32)
    bits = f32.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    out = rounded.view(np.float32)
    # ascontiguousarray makes a 0-d array 1-d: keep the caller's shape.
    return np.where(np.isnan(f32), f32, out).reshape(np.shape(x))


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """The uint16 bit patterns of `x` rounded to bfloat16 (ties to even; a
    NaN stays a quiet NaN), as kernels store bf16 in device memory."""
    rounded = np.ascontiguousarray(round_to_bf16(x))
    bits = (rounded.view(np.uint32) >> 16).astype(np.uint16)
    return np.where(np.isnan(rounded), bits | np.uint16(0x40), bits).reshape(np.shape(x))


def bf16_values(bits: np.ndarray) -> np.ndarray:
    """The float32 values of bfloat16 bit patterns (exact)."""
    wide = np.ascontiguousarray(bits, dtype=np.uint16).astype(np.uint32) << 16
    # ascontiguousarray makes a 0-d array 1-d: keep the caller's shape.
    return wide.view(np.float32).reshape(np.shape(bits))
