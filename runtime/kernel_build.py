"""Kernels ready to launch on a GPU: linked from kept PTX, or compiled to PTX
on all cores first.

numba's own path compiles a kernel at its first launch, one after another,
in the calling process. Here every kernel of a model whose PTX is not kept
yet (`runtime/kernel_cache.py`) is compiled with `numba.cuda.compile_ptx`
in a pool of processes (one per core, started with "spawn" so that no CUDA
context is inherited, and without `NUMBA_ENABLE_CUDASIM`, since the
simulator compiles nothing), the PTX is stored, and each kernel is then
built from its PTX as numba's own disk cache rebuilds one: a
`CUDACodeLibrary` holding the PTX for the device's compute capability
inside a `_Kernel`, registered with the kernel's dispatcher. The driver
links the PTX when the kernel is first bound.

```python
ptx = compile_ptx_parallel(kernels_py, {"f_g0_add": [(1, "float32"), (1, "float32")]}, (9, 0))
kernel = kernel_from_ptx(module.f_g0_add, ptx["f_g0_add"], [(1, "float32"), ...], (9, 0))
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
import types
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from fusec.compiler.diagnostics import FusecError
from fusec.runtime.kernel_cache import Signature
from fusec.runtime.progress import progress_bar

_ENTRY = re.compile(r"\.entry\s+([A-Za-z0-9_$]+)\s*\(")
# PTX with an unresolved external function needs a link step (NRT, numba's
# reshape helpers) that a bare PTX entry does not record: such a kernel is
# JIT-compiled by numba instead.
_EXTERN_FUNC = re.compile(r"^\s*\.extern\s+\.func", re.MULTILINE)

_worker_module: types.ModuleType | None = None


def _load_source(source: str) -> types.ModuleType:
    """kernels.py executed as a fresh module (its lines kept for tracebacks)."""
    filename = "<fusec kernels>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType("fusec_worker_kernels")
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def _init_worker(source: str) -> None:
    # Before numba.cuda is imported in this process: the simulator cannot
    # compile PTX.
    os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
    global _worker_module
    _worker_module = _load_source(source)


def array_types(signature: Signature) -> tuple[Any, ...]:
    """numba's argument types of a signature: C-contiguous arrays."""
    from numba.cuda import types as nt

    return tuple(nt.Array(getattr(nt, str(t)), int(n), "C") for n, t in signature)


def _compile_one(name: str, signature: Signature, cc: tuple[int, int]) -> str:
    """PTX of kernel `name` for `cc` (runs in a worker)."""
    from numba import cuda

    assert _worker_module is not None
    try:
        ptx, _ = cuda.compile_ptx(getattr(_worker_module, name).py_func,
                                  array_types(signature), cc=cc)
    except Exception as err:  # numba's errors do not always pickle: send text
        raise RuntimeError(f"{type(err).__name__}: {err}") from None
    return ptx


def compile_ptx_parallel(source: str, signatures: Mapping[str, Signature],
                         cc: tuple[int, int], workers: int | None = None) -> dict[str, str]:
    """PTX per kernel of `source`, compiled for `cc` on up to `workers`
    processes (default: every core), with a progress bar naming each kernel."""
    if not signatures:
        return {}
    count = max(1, min(len(signatures), workers or os.cpu_count() or 1))
    out: dict[str, str] = {}
    pool = ProcessPoolExecutor(count, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_init_worker, initargs=(source,))
    try:
        with pool, progress_bar(len(signatures), "compiling kernels") as bar:
            futures = {pool.submit(_compile_one, name, list(sig), tuple(cc)): name
                       for name, sig in signatures.items()}
            for done in as_completed(futures):
                name = futures[done]
                try:
                    out[name] = done.result()
                except BrokenProcessPool as err:
                    raise FusecError(f"the kernel compile workers stopped ({err})") from None
                except RuntimeError as err:
                    raise FusecError(f"numba could not compile kernel '{name}': {err}") \
                        from None
                bar.advance(name)
    finally:
        pool.shutdown(cancel_futures=True)
    return out


def linkable(ptx: str) -> bool:
    """Whether `ptx` is one self-contained kernel entry."""
    return len(_ENTRY.findall(ptx)) == 1 and not _EXTERN_FUNC.search(ptx)


def kernel_from_ptx(dispatcher: Any, ptx: str, signature: Signature,
                    cc: tuple[int, int]) -> Any:
    """A launchable numba `_Kernel` for `dispatcher`'s function made from
    its PTX, bound to the current context (the driver links it here, so a
    PTX this driver cannot take fails now, not mid-call), and registered as
    the dispatcher's overload for `signature`."""
    from numba.cuda import types as nt
    from numba.cuda.codegen import CUDACodeLibrary
    from numba.cuda.dispatcher import _Kernel

    entry = _ENTRY.search(ptx)
    if entry is None or not linkable(ptx):
        raise FusecError("the PTX is not one self-contained kernel entry")
    name = entry.group(1)
    library = CUDACodeLibrary._rebuild(
        codegen=None, name=name, entry_name=name, llvm_strs=[], ptx_cache={cc: [ptx]},
        cubin_cache={}, linkerinfo_cache={}, max_registers=None, nvvm_options={},
        needs_cudadevrt=False, nrt=False, use_cooperative=False, lto=False)
    argtypes = array_types(signature)
    kernel = _Kernel._rebuild(
        cooperative=False, name=name, signature=nt.void(*argtypes), codelibrary=library,
        debug=False, lineinfo=False, call_helper=None, extensions=[])
    kernel.bind()
    dispatcher.add_overload(kernel, argtypes)
    return kernel


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
