"""Telling a generated kernel numba rejects from a machine that cannot compile.

A kernel numba cannot type, lower or hand to NVVM is a bug in code
generation: fusec stops with an `InternalError` naming the kernel and numba's
first error line. A machine without the CUDA toolkit, libNVVM or NVRTC (or a
compute capability its toolkit does not know) is not: callers keep their
environmental handling for those (a note, or a `FusecError` saying the tool
is missing).

The subprocesses that compile kernels without the simulator
(`codegen/ptx.py`, `codegen/gpu_registers.py`, `codegen/kernel_probe.py`)
import this module (stdlib only, so it loads fast) to classify their errors;
a driver reports a kernel's error by `exit_for_kernel_error`, and its parent
reads it back with `kernel_error_of`.

```python
environmental(NvvmSupportError("libNVVM cannot be found."))   # True
first_error_line("TypingError: Failed in cuda mode pipeline ...\\nNo implementation ...")
# "TypingError: No implementation ..."
```
"""

from __future__ import annotations

import json
import re
import sys
from typing import NoReturn

# numba raises these (ImportError subclasses and CCSupportError) when the
# machine lacks the toolkit, not when a kernel is wrong.
ENVIRONMENT_ERRORS = frozenset({"CudaSupportError", "NvvmSupportError", "NvrtcSupportError",
                                "CCSupportError"})

KERNEL_ERROR_EXIT = 3
"""A driver's exit status after it printed a kernel's error (`exit_for_kernel_error`)."""

_TAG = "fusec-kernel-error: "
_ERROR_CHARS = 2000  # enough for numba's message; its first line is what is shown
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def environmental(err: BaseException) -> bool:
    """Whether an exception from compiling a kernel to PTX is this machine's
    (no CUDA toolkit, libNVVM or NVRTC, an unknown compute capability), not
    the kernel's. numba raises those as ImportError subclasses, CCSupportError
    and OSError (a library that will not load); a kernel it cannot type, lower
    or hand to NVVM raises NumbaError subclasses, NvvmError, or, from the
    source itself, SyntaxError, NameError and the like."""
    if isinstance(err, (ImportError, OSError)):
        return True
    if any(c.__name__ in ENVIRONMENT_ERRORS for c in type(err).__mro__):
        return True
    text = str(err)
    return type(err).__name__ == "NvvmError" and (
        "libNVVM cannot be found" in text or "is not available" in text)


def first_error_line(error: str) -> str:
    """The line of numba's error (`Kind: message`) that says what is wrong:
    numba's messages open with the pipeline stage that failed (`Failed in
    cuda mode pipeline (step: nopython frontend)`) and may be coloured."""
    text = _ANSI.sub("", error)
    kind, sep, rest = text.partition(": ")
    if not (sep and kind.isidentifier()):
        kind, rest = "", text
    lines = [line.strip() for line in rest.splitlines() if line.strip()]
    useful = [line for line in lines if not line.startswith(("Failed in ", "During: "))]
    line = (useful or lines or ["(no message)"])[0]
    return f"{kind}: {line}" if kind else line


def exit_for_kernel_error(kernel: str | None, err: Exception) -> NoReturn:
    """In a compiling subprocess: re-raise `err` when it is environmental (the
    parent reports the failed process as it always has), else print the
    kernel (None: kernels.py itself did not load) and its error on stdout and
    exit with `KERNEL_ERROR_EXIT`."""
    if environmental(err):
        raise err
    error = f"{type(err).__name__}: {err}"[:_ERROR_CHARS]
    print(_TAG + json.dumps({"kernel": kernel, "error": error}), flush=True)
    sys.exit(KERNEL_ERROR_EXIT)


def kernel_error_of(stdout: str) -> tuple[str | None, str] | None:
    """The kernel and first error line a driver reported by
    `exit_for_kernel_error`, if it did."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(_TAG):
            report = json.loads(line.removeprefix(_TAG))
            return report["kernel"], first_error_line(str(report["error"]))
    return None
