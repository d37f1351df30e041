"""The per-call input side of graph replay: each caller array to the address
its static buffer is copied from, with as little Python as possible.

A replayed call used to ask, for every input, what kind of array it is,
then convert and validate it; that cost more than the replay. Here each
input position keeps one *feeder* per Python type it has seen, built on
first sight with everything that does not depend on the data resolved
(the torch dtype object, the expected shape as the type compares it, the
kind of results it asks for). A feeder checks dtype, shape and layout
*before* any conversion (a bfloat16 CPU tensor is refused by name, never
handed to `.numpy()`), then returns `(kind, address, holder)`: the holder
keeps a converted copy alive until its copy is queued. A wrong array goes
through the executor's `check_inputs`, so errors read the same on every
path.

A bf16 parameter (uint16 bits on the device, `runtime/bf16_io.py`) takes a
torch.bfloat16 tensor as its bytes (a CUDA one read in place, no copy),
uint16 bit patterns as they are, and float32 values rounded on the way in:
NumPy arrays by `bf16_bits`, torch tensors by torch (a CUDA one into a new
tensor on torch's current stream, read in place). Other float32 arrays on
the GPU are refused, as on the per-call path.

```python
feed = InputFeed(fp, 0)
kind, ptr, holder = feed(torch_cuda_tensor)   # ("torch", data_ptr, tensor)
```

Nothing here touches a GPU; torch and CuPy are used only once such an
array came in (`runtime/arrays.py`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.program import FunctionProgram
from fusec.dialects.element_types import bf16_bits
from fusec.runtime.arrays import array_kind
from fusec.runtime.bf16_io import DEVICE_FLOAT32, is_bf16, torch_dtype

# (kind of results, address of the data, object to keep alive until copied)
Fed = tuple[str, int, Any]
Feeder = Callable[[Any], Fed]


class InputFeed:
    """Input `index` of `fp`: call it with the caller's array."""

    def __init__(self, fp: FunctionProgram, index: int) -> None:
        spec = fp.values[fp.inputs[index]]
        self.fp = fp
        self.index = index
        self.shape = tuple(int(d) for d in spec.shape)
        self.dtype = np.dtype(spec.dtype)
        self.bf16 = is_bf16(spec.dtype)  # float32 values are rounded in, bits taken as is
        self.strides = c_strides(self.shape, self.dtype)  # what a dense CAI array may state
        self._by_type: dict[type, Feeder] = {}

    def __call__(self, a: Any) -> Fed:
        feeder = self._by_type.get(type(a))
        if feeder is None:
            feeder = self._by_type[type(a)] = self._make(a)
        return feeder(a)

    def _make(self, a: Any) -> Feeder:
        """The feeder for arrays of `type(a)`."""
        kind = array_kind(a)
        if kind == "numpy":
            return self._numpy
        if kind in ("torch", "torch-cpu"):
            return self._torch_feeder()
        if kind == "cupy":
            return self._cupy
        if kind in ("dlpack-cpu", "dlpack-cuda"):
            return self._dlpack
        return self._cai

    def check(self, a: Any) -> None:
        """Raise the executor's own error when `a` is no array or has the
        wrong shape or dtype (`check_inputs`, the other inputs stood in for)."""
        from fusec.runtime.executor import check_inputs

        stand_ins: list[Any] = [np.empty(self.fp.values[v].shape, self.fp.values[v].dtype)
                                for v in self.fp.inputs]
        stand_ins[self.index] = a
        check_inputs(self.fp, stand_ins)

    def reject(self, a: Any, why: str = "") -> FusecError:
        """The error for a wrong input: `check`'s when it finds one, else
        one about layout (or `why`)."""
        self.check(a)
        name = (self.fp.input_names or self.fp.inputs)[self.index]
        return FusecError(f"input '{name}' of @{self.fp.name} "
                          f"{why or 'must be C-contiguous (copy it first)'}")

    def _numpy(self, a: np.ndarray) -> Fed:
        if a.dtype != self.dtype or a.shape != self.shape:
            if self.bf16 and a.dtype == np.float32 and a.shape == self.shape:
                bits = bf16_bits(a)
                return "numpy", bits.ctypes.data, bits
            raise self.reject(a)
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        return "numpy", a.ctypes.data, a

    def _torch_feeder(self) -> Feeder:
        torch = sys.modules["torch"]
        want = torch_dtype(torch, self.dtype)
        # bf16: uint16 bit patterns are taken as they are, float32 rounded by torch
        bits = getattr(torch, "uint16", None) if self.bf16 else None
        rounded = torch.float32 if self.bf16 else None
        shape = torch.Size(self.shape)

        def feed(a: Any) -> Fed:
            if a.dtype is not want and (a.dtype is not bits or bits is None):
                if a.dtype is not rounded or a.shape != shape:
                    raise self.reject(a)  # before any conversion: bfloat16 has no NumPy twin
                a = a.detach().to(want)
            if a.shape != shape:
                raise self.reject(a)
            if a.is_cuda:
                if not a.is_contiguous():
                    raise self.reject(a)
                return "torch", a.data_ptr(), a
            # CPU: copied in from its own memory (a strided one made dense first;
            # no `.numpy()`, so `requires_grad` needs no detach)
            host = a if a.is_contiguous() else a.contiguous()
            return "torch-cpu", host.data_ptr(), host

        return feed

    def _cupy(self, a: Any) -> Fed:
        if a.dtype != self.dtype or a.shape != self.shape or not a.flags.c_contiguous:
            raise self.reject(a, self._why_float32(a.dtype))
        return "cupy", a.data.ptr, a

    def _dlpack(self, a: Any) -> Fed:
        """A DLPack-only array: checked by its own shape and dtype where it
        has them, then viewed through NumPy or CuPy."""
        if hasattr(a, "dtype") and hasattr(a, "shape"):
            self.check(a)
        kind = array_kind(a)
        try:
            if kind == "dlpack-cpu":
                view: Any = np.from_dlpack(a)
            else:
                from fusec.runtime.arrays import device_view

                view = device_view(a, kind)
        except (TypeError, BufferError, ValueError) as err:
            raise self.reject(a, f"cannot be read through DLPack ({err})") from None
        if kind == "dlpack-cpu":
            _, ptr, held = self._numpy(view)
            return "dlpack-cpu", ptr, held
        _, ptr, held = self._cupy(view)
        return "dlpack-cuda", ptr, held

    def _cai(self, a: Any) -> Fed:
        iface = getattr(a, "__cuda_array_interface__", None)
        if not isinstance(iface, dict) or tuple(iface["shape"]) != self.shape \
                or np.dtype(iface["typestr"]) != self.dtype \
                or iface.get("strides") not in (None, self.strides):
            why = self._why_float32(iface["typestr"]) if isinstance(iface, dict) else ""
            raise self.reject(a, why)
        return "cai", int(iface["data"][0]), a

    def _why_float32(self, dtype: Any) -> str:
        """The reason a device array is refused when it holds float32 for a
        bf16 parameter (nothing rounds it there); else "" (the usual ones)."""
        return DEVICE_FLOAT32 if self.bf16 and np.dtype(dtype) == np.float32 else ""


def c_strides(shape: tuple[int, ...], dtype: np.dtype[Any]) -> tuple[int, ...]:
    """The byte strides of a C-contiguous array."""
    strides, step = [], dtype.itemsize
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))
