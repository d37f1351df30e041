"""Dynamic shared memory past the driver's default 48 KiB per block.

A kernel may declare its shared tiles as one dynamic array
(`cuda.shared.array(0, dtype)`); its `KernelLaunch.shared_bytes` is then the
size every launch passes (`_Kernel.launch(args, grid, block, stream,
shared_bytes)`, in a graph capture and in the tuner alike). Up to 48 KiB
that is all it takes; past it (up to the device's opt-in limit, 227 KiB on
Hopper: `Target.shared_memory_per_block`) the driver refuses the launch
unless the function's `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` was
raised first. `allow_dynamic_shared` raises it once per loaded kernel (numba
loads kernels through the library API, so the handle is a `CUkernel`, set
per device with `cuKernelSetAttribute`; cuda.core's `Kernel.attributes`
only reads it).

```python
kernels = load_gpu_kernels(...)
allow_launches(launches, kernels)   # before the first launch of each
```

The simulator sizes the dynamic array from the launch's `shared_bytes` and
has no attribute to raise: nothing here runs there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from fusec.analysis.program import KernelLaunch
from fusec.analysis.targets import STATIC_SHARED_BYTES

DEFAULT_DYNAMIC_LIMIT = STATIC_SHARED_BYTES
"""Dynamic shared memory a launch may request without the attribute (every
CUDA device; static arrays can never go past it)."""

# Kernels raised so far: (native handle, device id) -> bytes allowed. A
# kernel loaded again gets a new handle, so it is raised again.
_RAISED: dict[tuple[int, int], int] = {}


def _set_attribute(cufunc: Any, nbytes: int) -> None:
    """Set `cufunc`'s max dynamic shared size through numba's driver."""
    from numba.cuda.cudadrv.driver import binding, driver

    attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    if isinstance(cufunc.handle, binding.CUkernel):
        driver.cuKernelSetAttribute(attr, nbytes, cufunc.handle, cufunc.device.id)
    else:  # a CUfunction (numba-cuda before the library API)
        driver.cuFuncSetAttribute(cufunc.handle, attr, nbytes)


def _key(cufunc: Any) -> tuple[int, int]:
    return int(cufunc.handle), int(cufunc.device.id)


def allow_dynamic_shared(kernel: Any, nbytes: int,
                         setter: Callable[[Any, int], None] = _set_attribute) -> bool:
    """Let `kernel` (a numba `_Kernel`) launch with `nbytes` of dynamic
    shared memory; True when the attribute was raised now. Up to the
    default, or when already raised as far, nothing is asked of the driver."""
    if nbytes <= DEFAULT_DYNAMIC_LIMIT:
        return False
    cufunc = kernel._codelibrary.get_cufunc()
    key = _key(cufunc)
    if _RAISED.get(key, 0) >= nbytes:
        return False
    setter(cufunc, nbytes)
    _RAISED[key] = nbytes
    return True


def allow_launches(launches: Iterable[KernelLaunch], kernels: Iterable[Any],
                   setter: Callable[[Any, int], None] = _set_attribute) -> int:
    """`allow_dynamic_shared` for each launch and its kernel (None: a
    library call); how many attributes were raised."""
    return sum(allow_dynamic_shared(kernel, launch.shared_bytes, setter)
               for launch, kernel in zip(launches, kernels, strict=True)
               if kernel is not None)
