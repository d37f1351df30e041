"""A model's kernels on a GPU, without numba's per-process JIT where PTX is kept.

For each kernel: its PTX from `OUT/kernels` (written by `fusec MODEL -o OUT
--save-kernels`), else from the per-user cache; the kernels found in
neither are compiled to PTX on all cores (`kernel_build.compile_ptx_parallel`)
and stored in the per-user cache. Each is then linked from its PTX; one that
will not link (PTX written by a newer toolchain than this driver takes, or
one needing a link step) is reported and JIT-compiled by numba instead.

The simulator compiles no machine code: it never comes here, and the cache
is not used there.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from fusec.codegen.program import Program
from fusec.compiler.diagnostics import FusecError
from fusec.runtime.kernel_build import (
    compile_ptx_parallel,
    device_cc,
    jit_kernels,
    kernel_from_ptx,
    linkable,
)
from fusec.runtime.kernel_cache import KernelStore, Signature, kernel_key, user_store

# How the kernels of the last `load_gpu_kernels` call were obtained:
# "kept" (PTX found), "compiled" (PTX compiled now), "jit" (numba's JIT).
LAST_LOAD: dict[str, int] = {"kept": 0, "compiled": 0, "jit": 0}


def load_gpu_kernels(cuda: Any, module: ModuleType, source: str,
                     signatures: Mapping[str, Signature],
                     out_store: Path | None = None) -> dict[str, Any]:
    """A launchable `_Kernel` per kernel name of `signatures`."""
    cc = device_cc(cuda)
    keys = {name: kernel_key(source, name, sig, cc) for name, sig in signatures.items()}
    cache = user_store()
    stores = [s for s in (KernelStore(out_store) if out_store else None, cache) if s]
    ptx: dict[str, str] = {}
    for name in signatures:
        for store in stores:
            found = store.load(keys[name], name)
            if found is not None:
                ptx[name] = found
                break
    missing = {n: s for n, s in signatures.items() if n not in ptx}
    if missing:
        try:
            fresh = compile_ptx_parallel(source, missing, cc)
        except FusecError as err:
            print(f"fusec: warning: {err.message}; JIT-compiling in this process instead",
                  file=sys.stderr)
            fresh = {}
        for name, text in fresh.items():
            if cache is not None:
                cache.store(keys[name], name, text)
        ptx.update(fresh)
    kernels: dict[str, Any] = {}
    for name, sig in signatures.items():
        text = ptx.get(name)
        if text is not None and linkable(text):
            try:
                kernels[name] = kernel_from_ptx(getattr(module, name), text, sig, cc)
                continue
            except Exception as err:
                print(f"fusec: warning: cannot link the PTX of kernel '{name}' "
                      f"({type(err).__name__}: {err}); JIT-compiling it", file=sys.stderr)
    jit = {n: s for n, s in signatures.items() if n not in kernels}
    kernels.update(jit_kernels({n: getattr(module, n) for n in jit}, jit))
    LAST_LOAD.update(kept=sum(n not in missing and n not in jit for n in signatures),
                     compiled=sum(n in missing and n not in jit for n in signatures),
                     jit=len(jit))
    return kernels


def compile_for_out(program: Program) -> list[tuple[str, str, str]]:
    """(key, kernel, PTX) of every kernel of `program`, compiled on all cores
    for the GPU present (the profile's Hopper compute capability without
    one), also stored in the per-user cache: `fusec MODEL -o OUT
    --save-kernels` writes them to OUT/kernels."""
    from fusec.codegen.ptx import program_signatures

    signatures = program_signatures(program)
    cc = _compile_target_cc()
    ptx = compile_ptx_parallel(program.kernels_source, signatures, cc)
    cache = user_store()
    entries = []
    for name, text in sorted(ptx.items()):
        key = kernel_key(program.kernels_source, name, signatures[name], cc)
        if cache is not None:
            cache.store(key, name, text)
        entries.append((key, name, text))
    return entries


def _compile_target_cc() -> tuple[int, int]:
    """The GPU's compute capability, or Hopper's (codegen/ptx.py) without one."""
    from fusec.codegen.ptx import TARGET_CC
    from fusec.runtime.device import gpu_available, select_device

    if gpu_available() and select_device("auto") == "gpu":
        from numba import cuda

        return device_cc(cuda)
    return TARGET_CC
