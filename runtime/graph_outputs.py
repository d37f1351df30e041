"""The per-call output side of graph replay: for each kind of caller, the
stream a replay runs on and fresh result arrays of that kind.

One `ResultSink` per kind is built on first use, with everything resolved
that does not change between calls: the torch dtype and device objects, the
function that reads torch's current raw stream (no `torch.cuda.Stream`
object per call), the CuPy stream wrapping it. Per call it hands out the
stream (as CuPy's object, for `Graph.launch`, and as a raw pointer, for
`cudaMemcpyAsync`), the new output arrays with their addresses, and at the
end the arrays the caller gets (host kinds wait for the stream first).
For GPU kinds (`DEVICE_KINDS`) a graph captured for the new arrays'
addresses writes them itself (`in_place`, set by the runner); host
results are copied out of static buffers.

| kind | stream | results |
|---|---|---|
| torch (CUDA) | torch's current stream on the graph's device | `torch.empty` there |
| torch-cpu | legacy default stream, waited for | CPU `torch.empty` |
| cupy, dlpack-cuda | CuPy's current stream | `cupy.empty` |
| numpy, dlpack-cpu | legacy default stream, waited for | `numpy.empty` |
| cai (numba, others) | legacy default stream, waited for | numba device arrays |

A bf16 output (uint16 bits on the device) is allocated as torch.bfloat16 for
torch callers, so the graph writes the tensor the caller gets; NumPy callers
get float32 values (converted once the stream is done), like the per-call
path (`runtime/bf16_io.py`); CuPy and numba callers get the uint16 bits.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fusec.dialects.element_types import bf16_values
from fusec.runtime.bf16_io import is_bf16, torch_dtype
from fusec.runtime.library_gemm import external_stream

Spec = tuple[tuple[int, ...], np.dtype[Any]]
# Kinds whose arrays live on a GPU: read in place, results written in place.
DEVICE_KINDS = frozenset({"torch", "cupy", "cai", "dlpack-cuda"})


class ResultSink:
    """Stream and result arrays for one kind of caller."""

    def __init__(self, kind: str, out_specs: Sequence[Spec], cupy: Any, numba_cuda: Any,
                 device_id: int) -> None:
        self.kind = kind
        self.wait = kind in ("numpy", "dlpack-cpu", "torch-cpu", "cai")
        self.on_device = kind in DEVICE_KINDS
        self.in_place = False  # set by the runner: a graph writes the results itself
        self._cupy = cupy
        self._external: dict[int, Any] = {}
        self._stream = self._stream_reader(kind, device_id)
        self._fresh = [self._allocator(kind, shape, dtype, numba_cuda, device_id)
                       for shape, dtype in out_specs]
        # bf16 results a host caller gets as float32 values
        self._values = [i for i, (_, dtype) in enumerate(out_specs) if is_bf16(dtype.name)] \
            if kind in ("numpy", "dlpack-cpu") else []

    def stream(self) -> tuple[Any, int]:
        """The (CuPy stream, raw pointer) this call runs on."""
        return self._stream()

    def fresh(self) -> list[tuple[Any, int]]:
        """New result arrays and their addresses."""
        return [make() for make in self._fresh]

    def finish(self, arrays: list[Any], stream: Any) -> list[Any]:
        """The results as the caller gets them (host kinds: complete)."""
        if self.wait:  # host memory, or numba arrays, which carry no stream
            stream.synchronize()
        for i in self._values:
            arrays[i] = bf16_values(arrays[i])
        return arrays

    def _stream_reader(self, kind: str, device_id: int) -> Callable[[], tuple[Any, int]]:
        cupy = self._cupy
        if kind in ("cupy", "dlpack-cuda"):
            def current() -> tuple[Any, int]:
                s = cupy.cuda.get_current_stream()
                return s, s.ptr

            return current
        if kind != "torch":
            null = cupy.cuda.Stream.null
            return lambda: (null, 0)
        raw = torch_raw_stream(sys.modules["torch"], device_id)
        external = self._external

        def torch_current() -> tuple[Any, int]:
            ptr = raw()
            s = external.get(ptr)
            if s is None:
                s = external[ptr] = external_stream(cupy, ptr) if ptr \
                    else cupy.cuda.Stream.null
            return s, ptr

        return torch_current

    def _allocator(self, kind: str, shape: tuple[int, ...], dtype: np.dtype[Any],
                   numba_cuda: Any, device_id: int) -> Callable[[], tuple[Any, int]]:
        """A function giving one new result array of `kind` and its address."""
        if kind in ("torch", "torch-cpu"):
            torch = sys.modules["torch"]
            tdt = torch_dtype(torch, dtype)
            dev = torch.device("cuda", device_id) if kind == "torch" else torch.device("cpu")
            # `new_empty` of an empty tensor parses no dtype or device per call
            # (about a third cheaper than `torch.empty(shape, dtype=, device=)`)
            template = torch.empty(0, dtype=tdt, device=dev)

            def torch_empty() -> tuple[Any, int]:
                t = template.new_empty(shape)
                return t, t.data_ptr()

            return torch_empty
        if kind in ("cupy", "dlpack-cuda"):
            cupy = self._cupy

            def cupy_empty() -> tuple[Any, int]:
                c = cupy.empty(shape, dtype)
                return c, c.data.ptr

            return cupy_empty
        if kind == "cai":
            def numba_empty() -> tuple[Any, int]:
                d = numba_cuda.device_array(shape, dtype)
                return d, int(d.__cuda_array_interface__["data"][0])

            return numba_empty

        def host_empty() -> tuple[Any, int]:
            h = np.empty(shape, dtype)
            return h, h.ctypes.data

        return host_empty


def torch_raw_stream(torch: Any, device_id: int) -> Callable[[], int]:
    """A function reading torch's current stream on `device_id` as a raw
    pointer: torch's C accessor (what torch.compile's generated code calls),
    else the public `current_stream`, which builds a Stream object per call."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return lambda: int(raw(device_id))
    return lambda: int(torch.cuda.current_stream(device_id).cuda_stream)
