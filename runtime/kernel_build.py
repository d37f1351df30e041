"""Kernels ready to launch on a GPU: loaded from a kept cubin, linked from
kept PTX by the driver, or compiled on all cores first.

numba's own path compiles a kernel at its first launch, one after another,
in the calling process. Here every kernel of a model that is not kept yet
(`runtime/kernel_cache.py`) is compiled with `numba.cuda.compile_ptx` in a
pool of processes (one per core, started with "spawn" so that no CUDA
context is inherited, and without `NUMBA_ENABLE_CUDASIM`, since the
simulator compiles nothing); where `ptxas` is installed the same worker
assembles the PTX into a cubin for the device's compute capability, so that
no process has to have the driver compile PTX.

Each kernel is then built the way numba rebuilds a pickled kernel: a
`CUDACodeLibrary` whose caches hold the code under numba's own key for the
device (`_ensure_cc`: `(9, 0, "a")` on Hopper), inside a `_Kernel`
registered with the kernel's dispatcher. When the kernel is bound, numba
hands the cubin to the driver (`cuLibraryLoadData` through cuda.core's
`ObjectCode`); without a cubin, numba's linker (`driver._Linker.add_ptx`,
the driver's or nvJitLink's) turns the PTX into one first, and that cubin
is returned so the caller can keep it. Nothing in this path goes to NVVM,
which compiles only LLVM IR.

```python
code = compile_parallel(kernels_py, {"f_g0_add": [(1, "float32"), (1, "float32")]}, (9, 0))
kernel, linked_cubin = kernel_from_code(module.f_g0_add, code["f_g0_add"], signature)
kernel.launch(args, grid, block, stream, shared_bytes)
```

In the simulator there is no machine code: nothing here runs there (the
executor launches numba's simulated dispatchers directly).
"""

from __future__ import annotations

import linecache
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from fusec.analysis.diagnostics import FusecError
from fusec.runtime.kernel_cache import KernelCode, Signature
from fusec.runtime.progress import progress_bar

_ENTRY = re.compile(r"\.entry\s+([A-Za-z0-9_$]+)\s*\(")
# PTX with an unresolved external function needs a link step (NRT, numba's
# reshape helpers) that a bare PTX entry does not record: such a kernel is
# JIT-compiled by numba instead.
_EXTERN_FUNC = re.compile(r"^\s*\.extern\s+\.func", re.MULTILINE)

# ptxas assembles one kernel in well under a second; a hung tool must not
# hang the compile (the driver can still link the PTX).
PTXAS_TIMEOUT_S = 120

_worker_module: types.ModuleType | None = None


def load_source(source: str, name: str = "fusec_worker_kernels",
                filename: str = "<fusec kernels>") -> types.ModuleType:
    """kernels.py executed as a fresh module `name` (its lines kept for
    tracebacks under `filename`)."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(name)
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def _init_worker(source: str) -> None:
    # Before numba.cuda is imported in this process: the simulator cannot
    # compile PTX.
    os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
    global _worker_module
    _worker_module = load_source(source)


def array_types(signature: Signature) -> tuple[Any, ...]:
    """numba's argument types of a signature: C-contiguous arrays."""
    from numba.cuda import types as nt

    return tuple(nt.Array(getattr(nt, str(t)), int(n), "C") for n, t in signature)


def find_ptxas() -> str | None:
    """The ptxas to assemble cubins with: on PATH, else in $CUDA_HOME/bin
    (or $CUDA_PATH/bin); None when there is none."""
    found = shutil.which("ptxas")
    if found:
        return found
    for env in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(env)
        if root and os.access(os.path.join(root, "bin", "ptxas"), os.X_OK):
            return os.path.join(root, "bin", "ptxas")
    return None


def assemble_cubin(ptx: str, cc: tuple[int, int], ptxas: str | None,
                   max_registers: int = 0) -> bytes | None:
    """`ptx` assembled by `ptxas` for `sm_<cc>` (capped at `max_registers`
    per thread when > 0), or None (no ptxas, or one that rejects this PTX,
    e.g. older than the NVVM that wrote it: the driver then links the PTX at
    load time)."""
    if ptxas is None:
        return None
    with tempfile.TemporaryDirectory(prefix="fusec-cubin-") as tmp:
        src, out = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(src, "w", encoding="utf-8") as f:
            f.write(ptx)
        try:
            cap = [f"-maxrregcount={max_registers}"] if max_registers > 0 else []
            proc = subprocess.run([ptxas, f"-arch=sm_{cc[0]}{cc[1]}", *cap, "-o", out, src],
                                  capture_output=True, timeout=PTXAS_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if proc.returncode != 0 or not os.path.exists(out):
            return None
        with open(out, "rb") as f:
            return f.read() or None


def _compile_one(name: str, signature: Signature, cc: tuple[int, int],
                 ptxas: str | None) -> tuple[str, bytes | None]:
    """PTX of kernel `name` for `cc`, and its cubin where `ptxas` is given
    (runs in a worker)."""
    from numba import cuda

    assert _worker_module is not None
    dispatcher = getattr(_worker_module, name)
    try:
        ptx, _ = cuda.compile_ptx(dispatcher.py_func, array_types(signature), cc=cc)
    except Exception as err:  # numba's errors do not always pickle: send text
        raise RuntimeError(f"{type(err).__name__}: {err}") from None
    cap = declared_max_registers(dispatcher)
    return ptx, assemble_cubin(ptx, cc, ptxas, cap) if linkable(ptx) else None


def declared_max_registers(dispatcher: Any) -> int:
    """The `max_registers` a kernel was declared with (`--max-registers`), 0: none.
    It is the linker's option, not part of the PTX, so every path that turns
    the PTX into a cubin must pass it on."""
    options = getattr(dispatcher, "targetoptions", None) or {}
    return int(options.get("max_registers") or 0)


def compile_parallel(source: str, signatures: Mapping[str, Signature],
                     cc: tuple[int, int], workers: int | None = None) -> dict[str, KernelCode]:
    """PTX (and a cubin, where ptxas is installed) per kernel of `source`,
    compiled for `cc` on up to `workers` processes (default: every core),
    with a progress bar naming each kernel."""
    if not signatures:
        return {}
    count = max(1, min(len(signatures), workers or os.cpu_count() or 1))
    ptxas = find_ptxas()
    out: dict[str, KernelCode] = {}
    pool = ProcessPoolExecutor(count, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_init_worker, initargs=(source,))
    try:
        with pool, progress_bar(len(signatures), "compiling kernels") as bar:
            futures = {pool.submit(_compile_one, name, list(sig), tuple(cc), ptxas): name
                       for name, sig in signatures.items()}
            for done in as_completed(futures):
                name = futures[done]
                try:
                    ptx, cubin = done.result()
                except BrokenProcessPool as err:
                    raise FusecError(f"the kernel compile workers stopped ({err})") from None
                except RuntimeError as err:
                    raise FusecError(f"numba could not compile kernel '{name}': {err}") \
                        from None
                out[name] = KernelCode(ptx, cubin)
                bar.advance(name)
    finally:
        pool.shutdown(cancel_futures=True)
    return out


def linkable(ptx: str) -> bool:
    """Whether `ptx` is one self-contained kernel entry."""
    return len(_ENTRY.findall(ptx)) == 1 and not _EXTERN_FUNC.search(ptx)


def code_library(code: KernelCode, max_registers: int = 0) -> tuple[Any, Any]:
    """numba's `CUDACodeLibrary` holding `code` for the current device
    (linked under `max_registers` when > 0), and its cache key. The key is
    numba's own (`_ensure_cc`, `(9, 0, "a")` on Hopper): under any other
    key `get_cubin` would miss and hand the empty LLVM IR list to NVVM
    (ERROR_NO_MODULE_IN_PROGRAM)."""
    from numba.cuda.codegen import CUDACodeLibrary
    from numba.cuda.cudadrv.driver import ObjectCode

    entry = _ENTRY.search(code.ptx)
    if entry is None or not linkable(code.ptx):
        raise FusecError("the PTX is not one self-contained kernel entry")
    name = entry.group(1)
    library = CUDACodeLibrary._rebuild(
        codegen=None, name=name, entry_name=name, llvm_strs=[], ptx_cache={},
        cubin_cache={}, linkerinfo_cache={}, max_registers=max_registers or None,
        nvvm_options={},
        needs_cudadevrt=False, nrt=False, use_cooperative=False, lto=False)
    key = library._ensure_cc(None)  # asks the current context's device
    library._ptx_cache[key] = [code.ptx]
    if code.cubin:
        library._cubin_cache[key] = ObjectCode.from_cubin(code.cubin, name=name)
    return library, key


def kernel_from_code(dispatcher: Any, code: KernelCode,
                     signature: Signature) -> tuple[Any, bytes | None]:
    """A launchable numba `_Kernel` for `dispatcher`'s function, bound to the
    current context (so code this driver cannot take fails now, not mid-call)
    and registered as the dispatcher's overload for `signature`; and the
    cubin numba's linker made from the PTX when `code` had no cubin (or one
    this driver would not load), else None."""
    from numba.cuda import types as nt
    from numba.cuda.dispatcher import _Kernel

    library, key = code_library(code, declared_max_registers(dispatcher))
    argtypes = array_types(signature)
    kernel = _Kernel._rebuild(
        cooperative=False, name=library._entry_name, signature=nt.void(*argtypes),
        codelibrary=library, debug=False, lineinfo=False, call_helper=None, extensions=[])
    try:
        kernel.bind()
        from_cubin = code.cubin is not None
    except Exception as err:
        if code.cubin is None:
            raise
        label = getattr(getattr(dispatcher, "py_func", None), "__name__", library.name)
        print(f"fusec: warning: cannot load the kept cubin of kernel '{label}' "
              f"({type(err).__name__}: {err}); linking its PTX",
              file=sys.stderr)
        library._cubin_cache.pop(key, None)
        library._cufunc_cache.clear()
        kernel.bind()
        from_cubin = False
    dispatcher.add_overload(kernel, argtypes)
    linked = None if from_cubin else _cubin_bytes(library._cubin_cache.get(key))
    return kernel, linked


def _cubin_bytes(image: Any) -> bytes | None:
    """The bytes of a linked cubin (cuda.core's `ObjectCode`, or bytes in
    older numba-cuda)."""
    data = getattr(image, "code", image)
    return bytes(data) if isinstance(data, (bytes, bytearray)) and data else None


def jit_kernels(dispatchers: Mapping[str, Any],
                signatures: Mapping[str, Signature]) -> dict[str, Any]:
    """numba's own JIT of each kernel in this process (the fallback when a
    kernel cannot come from PTX), with a progress bar."""
    out: dict[str, Any] = {}
    with progress_bar(len(signatures), "JIT-compiling kernels") as bar:
        for name, sig in signatures.items():
            out[name] = dispatchers[name].compile(array_types(sig))
            bar.advance(name)
    return out


def device_cc(cuda: Any) -> tuple[int, int]:
    """The compute capability of the current GPU."""
    major, minor = cuda.get_current_device().compute_capability
    return int(major), int(minor)
