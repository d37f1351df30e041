"""The runtime's promise to the kernels: every array a kernel is given
starts on an `ARRAY_ALIGNMENT` (16-byte) boundary.

Kernels load and store 16-byte words without testing their arrays'
addresses (`codegen/wide_access.py`), so every array they get must start on
such a boundary. fusec's own allocations do (the device allocator's 256
bytes; constants and the memory plan's buffers are allocations of their
own), as do fresh torch and CuPy tensors. A caller's array need not: a
contiguous view that starts at an odd element (`x[1:]` of a row, one of
`qkv.split(...)`'s parts) is a valid input. Such an input is copied into a
fresh array before the kernels read it, on the call's stream (one
device-to-device copy; the per-call path, `runtime/executor.py`), or read
from the graph's static input buffer like a host array (graph replay,
`runtime/graphs.py`). An output array a caller hands in must be aligned.
"""

from __future__ import annotations

from typing import Any

from fusec.codegen.wide_access import ARRAY_ALIGNMENT


def aligned_address(ptr: int) -> bool:
    """Whether a kernel may be given an array that starts at `ptr`."""
    return ptr % ARRAY_ALIGNMENT == 0


def address(a: Any) -> int | None:
    """Where device array `a`'s data starts (the simulator's arrays: their
    NumPy memory); None for an array that says neither."""
    iface = getattr(a, "__cuda_array_interface__", None)
    if iface is not None:
        return int(iface["data"][0])
    raw = getattr(a, "_ary", None)  # numba's simulator
    return int(raw.ctypes.data) if raw is not None else None


def aligned_array(cuda: Any, a: Any, stream: Any) -> Any:
    """Device array `a` as it is when it starts on the boundary, else a
    copy of it in fresh memory (queued on `stream`)."""
    ptr = address(a)
    if ptr is None or aligned_address(ptr):
        return a
    copy = cuda.device_array(a.shape, dtype=a.dtype, stream=stream)
    copy.copy_to_device(a, stream=stream)
    return copy
