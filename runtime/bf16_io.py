"""bf16 inputs and outputs of the runtime.

Kernels keep a bf16 tensor in device memory as its uint16 bit patterns (see
`dialects.element_types`). At the runtime's edge a bf16 input may be:

- a NumPy float32 array: rounded to bf16 (nearest, ties to even) on the way in;
- a NumPy uint16 array: taken as the bit patterns themselves;
- a torch.bfloat16 tensor (CPU or CUDA): its bits, without a copy on the GPU.

A float32 torch tensor (CPU or CUDA) is rounded too, by torch. Any other
float32 array on the GPU (CuPy, numba) is refused: nothing there rounds it.

A bf16 output comes back as a NumPy float32 array holding bf16 values for
NumPy inputs (as the reference interpreter holds bf16), as a
torch.bfloat16 tensor for torch inputs, and as uint16 bits for other
device arrays (CuPy, numba). The CUDA-graph path (`runtime/graphs.py`)
hands back the same kinds: torch allocates the bfloat16 result and the
graph writes its bits in place.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from fusec.dialects.element_types import bf16_bits, bf16_values, element

BF16_DEVICE_DTYPE = np.dtype(element("bf16").device_dtype)
# Input dtypes a bf16 parameter accepts (torch's bfloat16 is read by name).
BF16_INPUT_DTYPES = (np.dtype(np.float32), BF16_DEVICE_DTYPE, "bfloat16")
DEVICE_FLOAT32 = ("is a float32 array on the GPU for a bf16 parameter: pass a torch.bfloat16 "
                  "or float32 tensor, uint16 bit patterns, or NumPy float32 values")


def is_bf16(dtype: str) -> bool:
    """Whether a value of device dtype `dtype` is bf16 (the language has no
    16-bit unsigned integers, so uint16 buffers are always bf16 bits)."""
    return np.dtype(dtype) == BF16_DEVICE_DTYPE


def _is_torch_bf16(a: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(a, torch.Tensor) and a.dtype == torch.bfloat16


def host_bits(a: Any) -> np.ndarray:
    """A host bf16 input as C-contiguous uint16 bit patterns."""
    if _is_torch_bf16(a):
        torch = sys.modules["torch"]
        return np.ascontiguousarray(a.detach().contiguous().view(torch.int16).numpy()
                                    .view(np.uint16))
    array = np.asarray(a)
    if array.dtype == BF16_DEVICE_DTYPE:
        return np.ascontiguousarray(array)
    return bf16_bits(array)


def device_bits(a: Any) -> Any:
    """A CUDA torch.bfloat16 tensor as an int16 tensor of its bits (torch
    has no CUDA array interface for bfloat16), a float32 one rounded to
    bfloat16 first; other arrays unchanged."""
    a = torch_rounded(a)
    if _is_torch_bf16(a):
        return a.view(sys.modules["torch"].int16)
    return a


def torch_rounded(a: Any) -> Any:
    """A float32 torch tensor rounded to torch.bfloat16 (nearest, ties to
    even: a new tensor on the same device, made on torch's current
    stream); any other array unchanged."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(a, torch.Tensor) and a.dtype == torch.float32:
        return a.detach().to(torch.bfloat16)
    return a


def torch_dtype(torch: Any, dtype: np.dtype[Any]) -> Any:
    """The torch dtype of a caller's array holding values of device dtype
    `dtype`: torch.bfloat16 for bf16's uint16 bits, else the same name."""
    return torch.bfloat16 if dtype == BF16_DEVICE_DTYPE else getattr(torch, dtype.name)


def as_uint16(device_array: Any) -> Any:
    """A numba device array of 16-bit elements viewed as uint16."""
    return device_array if device_array.dtype == BF16_DEVICE_DTYPE else \
        device_array.view(BF16_DEVICE_DTYPE)


def host_output(bits: np.ndarray, kind: str) -> Any:
    """A bf16 output copied to the host, as the caller's kind."""
    if kind == "torch-cpu" and "torch" in sys.modules:
        torch = sys.modules["torch"]
        return torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16)
    return bf16_values(bits)


def device_output(bits: Any, kind: str) -> Any:
    """A bf16 output left on the device: a torch.bfloat16 tensor for torch
    callers, else the uint16 bits (a CuPy array for CuPy callers)."""
    if kind == "torch" and "torch" in sys.modules:
        torch = sys.modules["torch"]
        return torch.as_tensor(bits.view(np.int16), device="cuda").view(torch.bfloat16)
    if kind in ("cupy", "dlpack-cuda") and "cupy" in sys.modules:
        return sys.modules["cupy"].asarray(bits)
    return bits
