"""A kernel compile worker: `python -m fusec.codegen.build_worker`.

Started by `codegen/build_pool.py` as a plain subprocess, so it never runs
the caller's `__main__` (multiprocessing's "spawn" re-imports a script's
main module in each worker: a script that imports torch costs seconds per
worker) and imports only the standard library, numba,
`codegen/compile_errors.py`, `codegen/numba_lowering.py` (one step of
numba's lowering made linear in a block's length) and
`codegen/numba_typing.py` (each distinct call typed once; both through
`codegen/numba_patch.py`). It imports numba's CUDA
target at once, and compiles a small kernel, before the first request, so
that it is warm by the time the front end has a kernel to compile. It
never runs with `NUMBA_ENABLE_CUDASIM` (the simulator compiles nothing; the
pool removes it from the environment).

One JSON request per line on stdin, one reply per line on stdout:

    {"source": KERNEL UNIT, "name": "fusec_kernel", "signature": [[1, "float32"], ...],
     "cc": [9, 0], "arch": "sm_90", "max_registers": 0,
     "ptxas": "/usr/local/cuda/bin/ptxas" or null,
     "key": CACHE KEY, "label": "f_g0_add", "store": KERNEL CACHE FOLDER or null}
    -> {"ptx": ..., "cubin": base64 or null, "registers": 30, "spill_bytes": 0}
    -> {"error": "TypingError: ...", "environment": false}

With a ptxas, the PTX is assembled once with `-v`: the cubin the runtime
loads and the register counts the register-budget pass reads come from the
same run. The worker stores what it built in the kernel cache itself, so a
build its caller stopped waiting for is kept all the same: when the caller
exits, a worker still compiling finishes that kernel, stores it and exits
(stdin closed), instead of being killed.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import tempfile
import types
from typing import Any

ENTRY = re.compile(r"\.entry\s+([A-Za-z0-9_$]+)\s*\(")
# PTX with an unresolved external function needs a link step (NRT, numba's
# reshape helpers) that a bare PTX entry does not record: such a kernel is
# JIT-compiled by numba instead.
_EXTERN_FUNC = re.compile(r"^\s*\.extern\s+\.func", re.MULTILINE)
_REGISTERS = re.compile(r"Used (\d+) registers")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")

# ptxas assembles one kernel in well under a second; a hung tool must not
# hang the compile (the driver can still link the PTX).
PTXAS_TIMEOUT_S = 120
UNIT_MODULE = "fusec_unit"  # one module name: equal units, equal PTX


def linkable(ptx: str) -> bool:
    """Whether `ptx` is one self-contained kernel entry."""
    return len(ENTRY.findall(ptx)) == 1 and not _EXTERN_FUNC.search(ptx)


def assemble(ptx: str, arch: str, ptxas: str,
             max_registers: int = 0) -> tuple[bytes | None, int | None, int | None]:
    """`ptx` assembled by `ptxas -v` for `arch` (`Target.ptxas_arch`, which
    the pool sends with each request: the worker imports no target; capped at `max_registers`
    per thread when > 0): (cubin, registers, spill bytes); (None, None, None)
    when ptxas cannot run or rejects the PTX (e.g. older than the NVVM that
    wrote it: the driver then links the PTX at load time)."""
    with tempfile.TemporaryDirectory(prefix="fusec-cubin-") as tmp:
        src, out = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(src, "w", encoding="utf-8") as f:
            f.write(ptx)
        cap = [f"-maxrregcount={max_registers}"] if max_registers > 0 else []
        try:
            proc = subprocess.run([ptxas, f"-arch={arch}", "-v", *cap, "-o", out, src],
                                  capture_output=True, text=True, timeout=PTXAS_TIMEOUT_S,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None, None, None
        if proc.returncode != 0 or not os.path.exists(out):
            return None, None, None
        with open(out, "rb") as f:
            cubin = f.read() or None
    report = proc.stdout + proc.stderr
    regs, spills = _REGISTERS.search(report), _SPILLS.search(report)
    spill_bytes = int(spills.group(1)) + int(spills.group(2)) if spills else 0
    return cubin, int(regs.group(1)) if regs else None, spill_bytes


def compile_request(request: dict[str, Any]) -> dict[str, Any]:
    """The reply to one request (see the module docstring); numba's CUDA
    target must be the real one in this process, not the simulator."""
    from numba import cuda
    from numba.cuda import types as nt

    from fusec.codegen import numba_lowering, numba_typing
    from fusec.codegen.compile_errors import environmental

    numba_lowering.install()  # numba's lowering in linear time (idempotent)
    numba_typing.install()  # each distinct call typed once
    try:
        module = types.ModuleType(UNIT_MODULE)
        exec(compile(request["source"], "<fusec kernel>", "exec"), module.__dict__)
        sig = tuple(nt.Array(getattr(nt, str(t)), int(n), "C") for n, t in request["signature"])
        cc = (int(request["cc"][0]), int(request["cc"][1]))
        ptx, _ = cuda.compile_ptx(getattr(module, request["name"]).py_func, sig, cc=cc)
    except Exception as err:  # numba's errors do not always pickle: send text
        return {"error": f"{type(err).__name__}: {err}"[:4000],
                "environment": environmental(err)}
    cubin = registers = spills = None
    if request.get("ptxas"):
        cubin, registers, spills = assemble(ptx, str(request["arch"]), request["ptxas"],
                                            int(request.get("max_registers") or 0))
        if not linkable(ptx):  # counts stand; the runtime JIT-compiles such a kernel
            cubin = None
    if request.get("store") and request.get("key"):
        # kept here, not by the caller: a build the caller stopped waiting
        # for (the probe's time budget, its process exiting) still lands in
        # the cache for the next compile
        from fusec.codegen.kernel_cache import KernelCode, KernelStore

        KernelStore(request["store"]).store(request["key"], request.get("label") or "kernel",
                                            KernelCode(ptx, cubin, registers, spills))
    return {"ptx": ptx, "cubin": base64.b64encode(cubin).decode("ascii") if cubin else None,
            "registers": registers, "spill_bytes": spills}


WARM_UP = """
import math
from numba import cuda, float32

def warm_up(x, y):
    tile = cuda.shared.array(32, float32)
    i = cuda.grid(1)
    if i < x.size:
        tile[cuda.threadIdx.x] = math.exp(x[i]) + math.sqrt(float32(2.0))
    cuda.syncthreads()
    if i < y.size:
        y[i] = tile[cuda.threadIdx.x] * float32(0.5)
"""
"""A small kernel that touches what every kernel needs (arrays, shared
memory, a barrier, libdevice's math): compiled once while the worker
waits for its first request, so that request does not pay for numba's
first compile (its typing and target contexts, libNVVM and libdevice
loaded: about 0.4 s on a 2-core machine)."""


def warm_up() -> None:
    """Compile `WARM_UP` and drop it (a failure is the real build's to report)."""
    from numba import cuda
    from numba.cuda import types as nt

    try:
        module = types.ModuleType("fusec_warm_up")
        exec(compile(WARM_UP, "<fusec warm-up>", "exec"), module.__dict__)
        cuda.compile_ptx(module.warm_up, (nt.float32[::1], nt.float32[::1]), cc=(7, 5))
    except Exception:  # no libNVVM here: the first request will say so
        pass


def main() -> int:
    """Serve requests until stdin closes."""
    os.environ.pop("NUMBA_ENABLE_CUDASIM", None)  # the pool removed it; an import must not see it
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))  # as kernels.py's prelude does
    import numba.cuda  # noqa: F401  (warm: the first request should not pay for it)
    from numba.cuda import compiler  # noqa: F401

    from fusec.codegen import numba_lowering, numba_typing

    numba_lowering.install()
    numba_typing.install()
    warm_up()

    for line in sys.stdin:
        if not line.strip():
            continue
        request: Any = None
        try:
            request = json.loads(line)
            reply = compile_request(request)
        except Exception as err:  # a malformed request: say so, keep serving
            reply = {"error": f"{type(err).__name__}: {err}"[:4000], "environment": True}
        reply["id"] = request.get("id") if isinstance(request, dict) else None
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
