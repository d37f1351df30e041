"""The caller's arrays: what kind they are, where their data is, and arrays
of the same kind for the results.

A model accepts NumPy arrays, CuPy arrays, PyTorch tensors (CPU or CUDA),
numba device arrays and any object with `__cuda_array_interface__` or
DLPack (`__dlpack__`). Results come back in the kind of the first input
that is not NumPy (all NumPy: NumPy):

| inputs | results | how the data travels |
|---|---|---|
| NumPy | NumPy | copied to the GPU and back |
| torch CPU | torch CPU | as NumPy (zero-copy views of the tensors) |
| torch CUDA | torch CUDA | zero-copy, on torch's current stream |
| CuPy | CuPy | zero-copy, on CuPy's current stream |
| numba / other `__cuda_array_interface__` | numba device arrays | zero-copy |
| DLPack on the CPU | NumPy | `numpy.from_dlpack` |
| DLPack on a GPU | CuPy | `cupy.from_dlpack` |

Nothing here imports torch or CuPy: a kind is recognised by the module its
type comes from, and those modules are used only once such an array came in.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from fusec.analysis.diagnostics import FusecError

# DLPack device types (dlpack.h): kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged.
_DLPACK_CPU = (1, 3)
_DLPACK_CUDA = (2, 13)


def array_kind(a: Any) -> str:
    """"numpy", "torch-cpu", "torch", "cupy", "cai" (numba or any other
    `__cuda_array_interface__`), "dlpack-cpu", "dlpack-cuda" or "other"."""
    if isinstance(a, np.ndarray):
        return "numpy"
    module = type(a).__module__.split(".")[0]
    if module == "torch":
        return "torch" if getattr(a, "is_cuda", False) else "torch-cpu"
    if module == "cupy":
        return "cupy"
    if hasattr(a, "__cuda_array_interface__") or hasattr(a, "copy_to_host"):
        return "cai"  # (the simulator's device arrays have no interface)
    if hasattr(a, "__dlpack__") and hasattr(a, "__dlpack_device__"):
        device = int(a.__dlpack_device__()[0])
        if device in _DLPACK_CPU:
            return "dlpack-cpu"
        if device in _DLPACK_CUDA:
            return "dlpack-cuda"
    return "other"


def result_kind(inputs: list[Any]) -> str:
    """The kind results are returned in: that of the first non-NumPy input."""
    for a in inputs:
        kind = array_kind(a)
        if kind != "numpy":
            return kind
    return "numpy"


def on_host(kind: str) -> bool:
    """Whether arrays of `kind` live in host memory."""
    return kind in ("numpy", "torch-cpu", "dlpack-cpu")


def host_array(a: Any, kind: str) -> np.ndarray:
    """A host input as a C-contiguous NumPy array (a view where possible):
    a CPU torch tensor is copied in like a NumPy array, whatever its dtype."""
    if kind == "torch-cpu":
        return np.ascontiguousarray(a.detach().numpy())
    if kind == "dlpack-cpu":
        return np.ascontiguousarray(np.from_dlpack(a))
    return np.ascontiguousarray(a)


def device_view(a: Any, kind: str) -> Any:
    """A device input as an object with `__cuda_array_interface__` (DLPack
    GPU arrays go through CuPy)."""
    if kind == "dlpack-cuda":
        cupy = _import("cupy", "a DLPack GPU array as input")
        return cupy.from_dlpack(a)
    return a


def wrap_results(kind: str, results: list[Any]) -> list[Any]:
    """Device `results` (numba arrays; in the graph path already of the
    caller's kind) as the caller's kind, without a host round trip."""
    if kind in ("cupy", "dlpack-cuda") and "cupy" in sys.modules:
        cupy = sys.modules["cupy"]
        return [r if isinstance(r, cupy.ndarray) else cupy.asarray(r) for r in results]
    if kind == "torch" and "torch" in sys.modules:
        torch = sys.modules["torch"]
        return [r if isinstance(r, torch.Tensor) else torch.as_tensor(r, device="cuda")
                for r in results]
    return results


def host_results(kind: str, results: list[np.ndarray]) -> list[Any]:
    """Host `results` as the caller's kind (torch CPU tensors share the
    NumPy arrays' memory)."""
    if kind == "torch-cpu" and "torch" in sys.modules:
        torch = sys.modules["torch"]
        return [torch.from_numpy(r) for r in results]
    return results


def _import(name: str, what: str) -> Any:
    try:
        return __import__(name)
    except ImportError:
        raise FusecError(f"{what} needs {name}, which is not installed") from None


def device_pointer(a: Any) -> int:
    """The device address of an array speaking `__cuda_array_interface__`."""
    return int(a.__cuda_array_interface__["data"][0])
