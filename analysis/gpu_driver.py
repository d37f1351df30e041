"""Whether a CUDA GPU is usable, asked of the CUDA driver library through
ctypes, never through numba: numba decides once, when `numba.cuda` is first
imported, whether it drives a GPU or simulates one, so the question must be
answerable before that import. `--target auto` (`analysis/targets.py`), the
GPU register counts (`codegen/gpu_registers.py`) and the runtime's choice of
device (`runtime/device.py`) all ask here.

```python
ok, why = gpu_probe()    # (True, "") or (False, "the CUDA driver reports no devices")
```
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys


@functools.cache
def gpu_probe() -> tuple[bool, str]:
    """(whether a CUDA GPU is usable, why not if it is not), asked of the
    driver library directly so that numba.cuda stays unimported."""
    names = ["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so"]
    found = ctypes.util.find_library("cuda")
    if found:
        names.append(found)
    lib = None
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        return False, "the CUDA driver library (libcuda) is not installed"
    if lib.cuInit(0) != 0:
        return False, "the CUDA driver failed to initialize (cuInit)"
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        return False, "the CUDA driver reports no devices"
    return True, ""
