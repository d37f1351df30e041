"""Kernels ready to launch on a GPU: loaded from a kept cubin, linked from
kept PTX by the driver, or compiled first, each distinct kernel once.

numba's own path compiles a kernel at its first launch, one after another,
in the calling process. Here the kernels of a model are cut into units
(`codegen/kernel_unit.py`: the kernel's body under one placeholder name, so
the 96 kernels of a 12-layer GPT-2 are 8 units) and each unit's code is
asked of `codegen/build_pool.py`: the same build for every kernel of that
body, in this process (every partition, every model) and, through the
kernel cache, in later ones. What is missing is compiled by numba's
`compile_ptx` in clean worker processes (`python -m
fusec.codegen.build_worker`: never the caller's `__main__`, never torch),
and assembled by ptxas into a cubin for the device's compute capability
where ptxas is installed, so that no process has to have the driver compile
PTX.

Each kernel is then built the way numba rebuilds a pickled kernel: a
`CUDACodeLibrary` whose caches hold the code under numba's own key for the
device (`_ensure_cc`: `(9, 0, "a")` on Hopper), inside a `_Kernel`
registered with the kernel's dispatcher. When the kernel is bound, numba
hands the cubin to the driver (`cuLibraryLoadData` through cuda.core's
`ObjectCode`); without a cubin, numba's linker (`driver._Linker.add_ptx`,
the driver's or nvJitLink's) turns the PTX into one first, and that cubin
is returned so the caller can keep it. Nothing in this path goes to NVVM,
which compiles only LLVM IR: a warm start (every unit in the cache) costs
reading the entries and loading the cubins.

```python
built = compile_parallel(kernels_py, {"f_g0_add": [(1, "float32"), (1, "float32")]}, (9, 0))
kernel, linked_cubin = kernel_from_code(module.f_g0_add, built.code["f_g0_add"], signature)
kernel.launch(args, grid, block, stream, shared_bytes)
```

In the simulator there is no machine code: nothing here runs there (the
executor launches numba's simulated dispatchers directly), and no worker is
started.
"""

from __future__ import annotations

import linecache
import sys
import types
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Any

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.targets import ptxas_arch_of
from fusec.codegen.build_pool import BuildFailed, Built, find_ptxas, kernel_code
from fusec.codegen.build_worker import ENTRY, assemble, linkable
from fusec.codegen.kernel_cache import KernelCode, KernelStore, Signature, kernel_key
from fusec.codegen.kernel_unit import units_of_source
from fusec.runtime.progress import progress_bar

__all__ = ["KernelBuilds", "array_types", "assemble_cubin", "code_library", "compile_parallel",
           "declared_max_registers", "device_cc", "find_ptxas", "jit_kernels",
           "kernel_from_code", "linkable", "load_source", "start_builds"]


def load_source(source: str, name: str = "fusec_worker_kernels",
                filename: str = "<fusec kernels>") -> types.ModuleType:
    """kernels.py executed as a fresh module `name` (its lines kept for
    tracebacks under `filename`)."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    module = types.ModuleType(name)
    exec(compile(source, filename, "exec"), module.__dict__)
    return module


def array_types(signature: Signature) -> tuple[Any, ...]:
    """numba's argument types of a signature: C-contiguous arrays."""
    from numba.cuda import types as nt

    return tuple(nt.Array(getattr(nt, str(t)), int(n), "C") for n, t in signature)


def assemble_cubin(ptx: str, cc: tuple[int, int], ptxas: str | None,
                   max_registers: int = 0) -> bytes | None:
    """`ptx` assembled by `ptxas` for `cc`'s architecture (capped at
    `max_registers` per thread when > 0), or None (no ptxas, or one that
    rejects this PTX)."""
    return assemble(ptx, ptxas_arch_of(cc), ptxas, max_registers)[0] if ptxas else None


def declared_max_registers(dispatcher: Any) -> int:
    """The `max_registers` a kernel was declared with (`--max-registers`), 0: none.
    It is the linker's option, not part of the PTX, so every path that turns
    the PTX into a cubin must pass it on."""
    options = getattr(dispatcher, "targetoptions", None) or {}
    return int(options.get("max_registers") or 0)


@dataclass
class KernelBuilds:
    """The code of each kernel (by name), its cache key, how many distinct
    kernels there were and how many of those came from a cache (OUT/kernels,
    the per-user cache, or a build earlier in this process); `fresh`: the
    keys built for this call."""

    code: dict[str, KernelCode] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)
    distinct: int = 0
    cached: int = 0
    fresh: set[str] = field(default_factory=set)


def compile_parallel(source: str, signatures: Mapping[str, Signature],
                     cc: tuple[int, int], out_store: KernelStore | None = None) -> KernelBuilds:
    """PTX (and a cubin, where ptxas is installed) per kernel of `source`
    (kernels.py), for `cc`: each distinct kernel once, from `out_store`, the
    kernel cache or a build in the workers, with a progress bar over the
    distinct kernels. A kernel numba rejects, or a machine that cannot
    compile, raises a `FusecError`."""
    builds = KernelBuilds()
    if not signatures:
        return builds
    units = units_of_source(source, signatures)
    keys = {name: kernel_key(units[name], sig, cc) for name, sig in signatures.items()}
    builds.keys = keys
    first = {key: name for name, key in reversed(keys.items())}  # the first kernel of each
    builds.distinct = len(first)
    futures: dict[Future[Built], str] = {}
    with progress_bar(len(first), "compiling kernels",
                      summary=f"{len(signatures)} launched") as bar:
        got: dict[str, KernelCode] = {}
        for key, name in first.items():
            kept = out_store.load(key, name) if out_store is not None else None
            if kept is not None:
                got[key] = kept
                builds.cached += 1
                bar.advance(name, cached=True)
                continue
            future = kernel_code(units[name], signatures[name], cc, name)
            if future.done() and future.exception() is None:  # no build for this call
                got[key] = future.result().code
                builds.cached += 1
                bar.advance(name, cached=True)
            else:
                futures[future] = key
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                key = futures[future]
                try:
                    built = future.result()
                except BuildFailed as err:
                    raise FusecError(f"numba could not compile kernel '{first[key]}': "
                                     f"{err.message}") from None
                got[key] = built.code
                builds.cached += built.cached
                if not built.cached:
                    builds.fresh.add(key)
                bar.advance(first[key], cached=built.cached)
    builds.code = {name: got[key] for name, key in keys.items()}
    return builds


def start_builds(source: str, signatures: Mapping[str, Signature],
                 cc: tuple[int, int]) -> int:
    """Ask the build workers now for every distinct kernel of `source` that
    no cache holds, without waiting: a model's first call (`compile_parallel`,
    which gets the same builds from `codegen/build_pool.py`'s memo) then
    waits only for what is still running. Returns the distinct kernels."""
    if not signatures:
        return 0
    units = units_of_source(source, signatures)
    asked: set[str] = set()
    for name, sig in signatures.items():
        key = kernel_key(units[name], sig, cc)
        if key not in asked:
            asked.add(key)
            kernel_code(units[name], sig, cc, name)
    return len(asked)


def code_library(code: KernelCode, max_registers: int = 0) -> tuple[Any, Any]:
    """numba's `CUDACodeLibrary` holding `code` for the current device
    (linked under `max_registers` when > 0), and its cache key. The key is
    numba's own (`_ensure_cc`, `(9, 0, "a")` on Hopper): under any other
    key `get_cubin` would miss and hand the empty LLVM IR list to NVVM
    (ERROR_NO_MODULE_IN_PROGRAM)."""
    from numba.cuda.codegen import CUDACodeLibrary
    from numba.cuda.cudadrv.driver import ObjectCode

    entry = ENTRY.search(code.ptx)
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
