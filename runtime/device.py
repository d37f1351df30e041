"""Choosing where kernels run: a CUDA GPU or numba's CUDA simulator.

numba decides once, when `numba.cuda` is first imported, whether it drives a
GPU or simulates one (`NUMBA_ENABLE_CUDASIM=1`). So the choice is made here,
before that import, and a GPU is detected without numba: by loading the CUDA
driver library with ctypes and asking it for a device count
(`analysis/gpu_driver.py`).

```python
kind = select_device("auto")   # "gpu" or "sim"; prints a notice when it picks sim
cuda = cuda_module()           # numba.cuda, imported in the chosen mode
```

- `auto`: the GPU when one exists, else the simulator, with a one-line notice
  on stderr (once per process). If `NUMBA_ENABLE_CUDASIM=1` is already set,
  the user chose the simulator and no notice is printed.
- `gpu`: a clear error when there is no GPU (or when numba.cuda was already
  loaded in simulator mode in this process).
- `sim`: the simulator (an error if numba.cuda was already loaded for a GPU).
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import Literal

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.gpu_driver import gpu_probe

DeviceKind = Literal["gpu", "sim"]
DEVICE_CHOICES: tuple[str, ...] = ("auto", "gpu", "sim")
SIM_ENV = "NUMBA_ENABLE_CUDASIM"
# Every notice fusec prints is one line, `fusec: note: ...` (warnings: `fusec: warning:`).
SIM_NOTICE = "fusec: note: no CUDA GPU found; running kernels in numba's CUDA simulator (slow)"

_notice_printed = False
_notice_pending = False


def gpu_available() -> bool:
    """Whether a CUDA GPU is usable, detected without importing numba.cuda."""
    return gpu_probe()[0]


def _loaded_mode() -> DeviceKind | None:
    """The mode numba.cuda was imported in, or None if it is not loaded yet."""
    if "numba.cuda" not in sys.modules:
        return None
    from numba.cuda.core import config

    return "sim" if config.ENABLE_CUDASIM else "gpu"


def _sim_env_set() -> bool:
    return os.environ.get(SIM_ENV, "0").strip() not in ("", "0")


def simulator_forced() -> bool:
    """Whether numba's simulator is forced (`NUMBA_ENABLE_CUDASIM`, or
    numba.cuda loaded in simulator mode)."""
    return _sim_env_set() or _loaded_mode() == "sim"


def select_device(device: str = "auto", notice: bool = True) -> DeviceKind:
    """Resolve `device` ("auto", "gpu" or "sim") to where kernels will run,
    setting up numba for it; call before anything imports numba.cuda.
    `notice=False` holds the simulator notice back until `print_held_notice()`,
    so that errors about the input come before it (`fusec run`)."""
    if device not in DEVICE_CHOICES:
        raise FusecError(
            f"unknown device '{device}' (expected one of: {', '.join(DEVICE_CHOICES)})"
        )
    _quiet_occupancy()
    loaded = _loaded_mode()
    if loaded is not None:
        return _check_loaded(device, loaded, notice)
    if device == "sim" or (device == "auto" and _sim_env_set()):
        os.environ[SIM_ENV] = "1"
        return "sim"
    ok, why = gpu_probe()
    if device == "gpu":
        if not ok:
            raise FusecError(f"--device gpu: no usable CUDA GPU ({why}); use --device sim")
        if _sim_env_set():
            raise FusecError(f"--device gpu: {SIM_ENV} is set, which forces the simulator")
        return "gpu"
    if ok:
        return "gpu"
    os.environ[SIM_ENV] = "1"
    _print_notice(notice)
    return "sim"


def _quiet_occupancy() -> None:
    """Turn off numba's "grid size N will likely result in GPU
    under-utilization" warning: fusec sizes every grid on purpose (a small
    tensor gets a small grid, a split reduction as many blocks as pay), so the
    warning would only repeat on every small kernel. A user's own setting of
    NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS is kept."""
    if "NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS" in os.environ:
        return
    os.environ["NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS"] = "0"
    config = sys.modules.get("numba.cuda.core.config")  # read already: set it there too
    if config is not None:
        config.CUDA_LOW_OCCUPANCY_WARNINGS = 0


def _check_loaded(device: str, loaded: DeviceKind, notice: bool = True) -> DeviceKind:
    """numba.cuda is already imported: its mode cannot change any more."""
    if device == "gpu" and loaded == "sim":
        raise FusecError(
            "--device gpu: numba.cuda is already running in simulator mode in this "
            f"process ({SIM_ENV} was set before it was imported)"
        )
    if device == "sim" and loaded == "gpu":
        raise FusecError(
            "--device sim: numba.cuda was already loaded for the GPU in this process; "
            f"set {SIM_ENV}=1 before it is imported"
        )
    if device == "auto" and loaded == "sim" and not _sim_env_set():
        _print_notice(notice)
    return loaded


def _print_notice(now: bool) -> None:
    global _notice_printed, _notice_pending
    if _notice_printed:
        return
    if not now:
        _notice_pending = True
        return
    print(SIM_NOTICE, file=sys.stderr)
    _notice_printed = True
    _notice_pending = False


def print_held_notice() -> None:
    """Print the simulator notice that `select_device(..., notice=False)` held back."""
    if _notice_pending:
        _print_notice(True)


def cuda_module(device: str = "auto") -> ModuleType:
    """`numba.cuda`, imported in the mode `select_device(device)` chooses."""
    select_device(device)
    from numba import cuda

    return cuda
