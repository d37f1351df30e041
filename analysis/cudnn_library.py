"""Where cuDNN is, if anywhere: the shared library fusec's library
convolutions call (`runtime/cudnn_conv.py`), looked up without loading it.

The compiler asks `cudnn_available()` when it chooses between a library
convolution and its own kernel (`scheduling/conv_choice.py`); the runtime
loads the file `find_cudnn()` names. Looked for, in order:

1. `FUSEC_CUDNN`: a path to `libcudnn.so.*` (or `0`/`off`: no cuDNN, every
   convolution is fusec's own kernel);
2. the `nvidia-cudnn-cu12`/`-cu13` wheels (`nvidia/cudnn/lib` in a
   site-packages folder: what `pip install fusec[gpu]` and PyTorch install);
3. PyTorch's own `torch/lib` (older wheels bundle cuDNN there);
4. the system's library path (`ctypes.util.find_library("cudnn")`).

The simulator (`NUMBA_ENABLE_CUDASIM=1`) runs no library call: there cuDNN
counts as absent.
"""

from __future__ import annotations

import ctypes.util
import functools
import importlib.util
import os
from pathlib import Path

from fusec.analysis.env_switch import switched_off

ENV = "FUSEC_CUDNN"
"""The environment variable naming cuDNN's file, or `0` to use none."""
SONAMES = ("libcudnn.so.9", "libcudnn.so.8")
"""The cuDNN versions whose legacy convolution API fusec calls (8 and 9)."""


def _simulated() -> bool:
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def _package_dirs(package: str) -> list[Path]:
    """The folders of an installed (namespace) package, without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    if spec is None or spec.submodule_search_locations is None:
        return []
    return [Path(p) for p in spec.submodule_search_locations]


def _in_folder(folder: Path) -> str | None:
    for name in SONAMES:
        if (folder / name).is_file():
            return str(folder / name)
    return None


@functools.cache
def find_cudnn() -> str | None:
    """The path (or soname) of the cuDNN library to load; None when there is
    none, cuDNN is switched off, or kernels run in the simulator."""
    if _simulated():
        return None
    given = os.environ.get(ENV, "").strip()
    if given:
        if switched_off(ENV):
            return None
        return given if Path(given).is_file() else None
    for folder in _package_dirs("nvidia"):
        for sub in ("cudnn/lib", "cu13/lib", "cu12/lib"):
            if (found := _in_folder(folder / sub)) is not None:
                return found
    for folder in _package_dirs("torch"):
        if (found := _in_folder(folder / "lib")) is not None:
            return found
    name = ctypes.util.find_library("cudnn")
    return name or None


def cudnn_available() -> bool:
    """Whether a cuDNN library is there to call (not whether a GPU is)."""
    return find_cudnn() is not None


@functools.cache
def sdpa_available() -> bool:
    """Whether cuDNN's fused attention can be called: cuDNN and the
    `nvidia-cudnn-frontend` package (module `cudnn`, looked up without
    importing it) are installed (`runtime/cudnn_sdpa.py`)."""
    if not cudnn_available():
        return False
    try:
        return importlib.util.find_spec("cudnn") is not None
    except (ImportError, ValueError):
        return False


FRONTEND_MISSING = ("cuDNN's fused attention would compute it, but its Python package is not "
                    "installed: pip install nvidia-cudnn-frontend==1.14.1")
"""Why an attention cuDNN could take stays fusec's own kernel where cuDNN is
installed without `nvidia-cudnn-frontend` (as with PyTorch alone): fusec's
kernel was 5x slower than cuDNN's on ViT-B/16's S = 197 in bf16 (H100)."""


def frontend_missing() -> bool:
    """Whether cuDNN is installed but not the package its attention needs."""
    return cudnn_available() and not sdpa_available()


TF32_ATTR = "conv_tf32"
"""The group attribute (`"true"`) by which the convolution choice lets an f32
library convolution run on TF32 tensor cores."""
