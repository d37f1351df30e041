"""A model's kernels on a GPU, without numba's per-process JIT where code is kept.

For each kernel: its code (PTX, and a cubin where one was built) from
`OUT/kernels` (written by `fusec MODEL -o OUT --save-kernels`), else from the
per-user cache; the kernels found in neither are compiled on all cores
(`kernel_build.compile_parallel`) and stored in the per-user cache. Each is
then loaded from its cubin, or linked from its PTX by the driver (the cubin
that makes is stored too, so the next process loads it); one that will not
load or link (code written by a newer toolchain than this driver takes, or
one needing a link step) is reported and JIT-compiled by numba instead.

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
from fusec.runtime.kernel_build import (
    compile_parallel,
    device_cc,
    jit_kernels,
    kernel_from_code,
    linkable,
)
from fusec.runtime.kernel_cache import KernelCode, KernelStore, Signature, kernel_key, user_store

# How the kernels of the last `load_gpu_kernels` call were obtained:
# "kept" (code found), "compiled" (compiled now), "jit" (numba's JIT); and
# "linked": of the first two, those whose PTX the driver linked in this
# process because no usable cubin was at hand.
LAST_LOAD: dict[str, int] = {"kept": 0, "compiled": 0, "jit": 0, "linked": 0}


def load_gpu_kernels(cuda: Any, module: ModuleType, source: str,
                     signatures: Mapping[str, Signature],
                     out_store: Path | None = None) -> dict[str, Any]:
    """A launchable `_Kernel` per kernel name of `signatures`."""
    cc = device_cc(cuda)
    keys = {name: kernel_key(source, name, sig, cc) for name, sig in signatures.items()}
    cache = user_store()
    code = _kept_code(keys, [s for s in (KernelStore(out_store) if out_store else None, cache)
                             if s])
    missing = {n: s for n, s in signatures.items() if n not in code}
    if missing:
        try:
            fresh = compile_parallel(source, missing, cc)
        except FusecError as err:
            print(f"fusec: warning: {err.message}; JIT-compiling in this process instead",
                  file=sys.stderr)
            fresh = {}
        for name, kc in fresh.items():
            if cache is not None:
                cache.store(keys[name], name, kc)
        code.update(fresh)
    kernels: dict[str, Any] = {}
    linked = 0
    for name, sig in signatures.items():
        kc = code.get(name)
        if kc is None or not linkable(kc.ptx):
            continue
        try:
            kernels[name], cubin = kernel_from_code(getattr(module, name), kc, sig)
        except Exception as err:
            print(f"fusec: warning: cannot load the code of kernel '{name}' "
                  f"({type(err).__name__}: {err}); JIT-compiling it", file=sys.stderr)
            continue
        if cubin is not None:  # linked here: keep the cubin for the next process
            linked += 1
            if cache is not None:
                cache.store(keys[name], name, replace(kc, cubin=cubin))
    jit = {n: s for n, s in signatures.items() if n not in kernels}
    kernels.update(jit_kernels({n: getattr(module, n) for n in jit}, jit))
    LAST_LOAD.update(kept=sum(n not in missing and n not in jit for n in signatures),
                     compiled=sum(n in missing and n not in jit for n in signatures),
                     jit=len(jit), linked=linked)
    return kernels


def _kept_code(keys: Mapping[str, str], stores: list[KernelStore]) -> dict[str, KernelCode]:
    """The kept code per kernel: the first store's entry, preferring one
    with a cubin (OUT/kernels may hold only PTX where the cache has both)."""
    found: dict[str, KernelCode] = {}
    for name, key in keys.items():
        for store in stores:
            kc = store.load(key, name)
            if kc is not None and (name not in found or kc.cubin):
                found[name] = kc
            if name in found and found[name].cubin:
                break
    return found


def compile_for_out(program: Program) -> list[tuple[str, str, KernelCode]]:
    """(key, kernel, code) of every kernel of `program`, compiled on all
    cores for the GPU present (the profile's Hopper compute capability
    without one), also stored in the per-user cache: `fusec MODEL -o OUT
    --save-kernels` writes them to OUT/kernels."""
    from fusec.codegen.ptx import program_signatures

    signatures = program_signatures(program)
    cc = _compile_target_cc()
    code = compile_parallel(program.kernels_source, signatures, cc)
    cache = user_store()
    entries = []
    for name, kc in sorted(code.items()):
        key = kernel_key(program.kernels_source, name, signatures[name], cc)
        if cache is not None:
            cache.store(key, name, kc)
        entries.append((key, name, kc))
    return entries


def _compile_target_cc() -> tuple[int, int]:
    """The GPU's compute capability, or Hopper's (codegen/ptx.py) without one."""
    from fusec.codegen.ptx import TARGET_CC
    from fusec.runtime.device import gpu_available, select_device

    if gpu_available() and select_device("auto") == "gpu":
        from numba import cuda

        return device_cc(cuda)
    return TARGET_CC
