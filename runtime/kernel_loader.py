"""A model's kernels on a GPU, without numba's per-process JIT where code is kept.

For each distinct kernel (`codegen/kernel_unit.py`: kernels that differ only
in their names are one; it is loaded once and serves every launch of that
body): its code (PTX, a cubin where one was built) from
`OUT/kernels` (written by `fusec MODEL -o OUT --save-kernels`), else from the
per-user kernel cache or a build earlier in this process; the kernels found
nowhere are compiled in the build workers (`kernel_build.compile_parallel`,
`codegen/build_pool.py`) and stored in the per-user cache. Each is then
loaded from its cubin, or linked from its PTX by the driver (the cubin that
makes is stored too, so the next process loads it); one that will not load
or link (code written by a newer toolchain than this driver takes, or one
needing a link step) is reported and JIT-compiled by numba instead.

The simulator compiles no machine code: it never comes here, and the cache
is not used there.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.program import Program
from fusec.codegen.kernel_cache import KernelCode, KernelStore, Signature, user_store
from fusec.runtime.kernel_build import (
    array_types,
    compile_parallel,
    device_cc,
    jit_kernels,
    kernel_from_code,
    linkable,
)

# How the kernels of the last `load_gpu_kernels` call were obtained:
# "kept" (code found), "compiled" (compiled now), "jit" (numba's JIT);
# "linked": of the first two, those whose PTX the driver linked in this
# process because no usable cubin was at hand; "distinct": the distinct
# kernels among them, "cached": how many of those came from a cache.
LAST_LOAD: dict[str, int] = {"kept": 0, "compiled": 0, "jit": 0, "linked": 0, "distinct": 0,
                             "cached": 0}


def load_gpu_kernels(cuda: Any, module: ModuleType, source: str,
                     signatures: Mapping[str, Signature],
                     out_store: Path | None = None) -> dict[str, Any]:
    """A launchable `_Kernel` per kernel name of `signatures`."""
    cc = device_cc(cuda)
    try:
        builds = compile_parallel(source, signatures, cc,
                                  KernelStore(out_store) if out_store else None)
        code, keys = builds.code, builds.keys
    except FusecError as err:
        print(f"fusec: warning: {err.message}; JIT-compiling in this process instead",
              file=sys.stderr)
        code, keys, builds = {}, {}, None
    cache = user_store()
    kernels: dict[str, Any] = {}
    linked: dict[str, bytes] = {}  # cubins the driver linked here, by key
    loaded: dict[str, Any] = {}  # one loaded kernel per distinct body, by key
    for name, sig in signatures.items():
        kc = code.get(name)
        if kc is None or not linkable(kc.ptx):
            continue
        shared = loaded.get(keys[name])
        if shared is not None:
            # Same key, same code and argument types: the kernel loaded for the
            # first of them serves every launch of this body (one module image
            # given to the driver, not one per layer).
            getattr(module, name).add_overload(shared, array_types(sig))
            kernels[name] = shared
            continue
        if kc.cubin is None and keys[name] in linked:  # linked for a kernel of the same body
            kc = replace(kc, cubin=linked[keys[name]])
        try:
            kernels[name], cubin = kernel_from_code(getattr(module, name), kc, sig)
            loaded[keys[name]] = kernels[name]
        except Exception as err:
            print(f"fusec: warning: cannot load the code of kernel '{name}' "
                  f"({type(err).__name__}: {err}); JIT-compiling it", file=sys.stderr)
            continue
        if cubin is not None and keys[name] not in linked:  # keep it for the next process
            linked[keys[name]] = cubin
            if cache is not None:
                cache.store(keys[name], name, replace(kc, cubin=cubin))
    jit = {n: s for n, s in signatures.items() if n not in kernels}
    kernels.update(jit_kernels({n: getattr(module, n) for n in jit}, jit))
    fresh = builds.fresh if builds is not None else set()
    LAST_LOAD.update(kept=sum(n not in jit and keys[n] not in fresh for n in signatures),
                     compiled=sum(n not in jit and keys[n] in fresh for n in signatures),
                     jit=len(jit), linked=len(linked),
                     distinct=builds.distinct if builds is not None else 0,
                     cached=builds.cached if builds is not None else 0)
    return kernels


def compile_for_out(program: Program) -> list[tuple[str, str, KernelCode]]:
    """(key, kernel, code) of every distinct kernel of `program`, compiled in
    the build workers for the GPU present (without one, for the compute
    capability of the target the program was compiled for), also stored in
    the per-user cache: `fusec MODEL -o OUT --save-kernels` writes them to
    OUT/kernels."""
    from fusec.codegen.ptx import program_signatures

    signatures = program_signatures(program)
    builds = compile_parallel(program.kernels_source, signatures, _compile_target_cc(program))
    entries: dict[str, tuple[str, str, KernelCode]] = {}
    for name in sorted(builds.code):
        key = builds.keys[name]
        entries.setdefault(key, (key, name, builds.code[name]))
    return list(entries.values())


def _compile_target_cc(program: Program) -> tuple[int, int]:
    """The GPU's compute capability, or without one that of the target
    `program` was compiled for."""
    from fusec.runtime.device import gpu_available, select_device

    if gpu_available() and select_device("auto") == "gpu":
        from numba import cuda

        return device_cc(cuda)
    return program.target.compute_capability
