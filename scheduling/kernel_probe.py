"""The real register count of one group's kernel, before the program exists:
the group's kernel generated the normal way, compiled to PTX by numba for the
target's compute capability and assembled by `ptxas -v` (optionally under
`-maxrregcount N`, what `--max-registers N` caps every kernel at).

`register-budget` asks this when the estimate alone cannot decide (within
25% of the budget, or under a cap). Counts are cached in-process by kernel
source (comments and the kernel's name left out), signature, architecture
and cap, so the same kernel is never assembled twice; a long-lived worker
process (without `NUMBA_ENABLE_CUDASIM`, which cannot compile PTX) keeps
numba imported between kernels.

```python
probe = KernelProbe()
count = probe.count(group, target, cap=32)   # None: no ptxas or no NVVM (probe.note says so)
count.registers, count.spill_bytes, count.threads
```

A kernel numba itself rejects (it cannot type or lower it) is a bug in code
generation, not a missing tool: `count` raises an `InternalError` naming the
kernel, its group and numba's first error line, and fusec stops.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field

from xdsl.dialects.func import FuncOp
from xdsl.ir import SSAValue

from fusec.analysis.diagnostics import FusecError, InternalError, counted
from fusec.analysis.targets import Target
from fusec.codegen.compile_errors import first_error_line
from fusec.codegen.kernel_source import (
    KernelParam,
    KernelSource,
    kernel_prelude,
    numba_type,
    value_dtype,
)
from fusec.codegen.ptx import ptxas_usage
from fusec.dialects.fusion import GroupOp

PROBE_KERNEL = "probe_kernel"  # every probed kernel gets this name: equal kernels, equal keys

# One request per line: {"source", "name", "signature", "cc"} -> {"ptx"} or {"error"}.
_WORKER = r"""
import json, sys, types
from numba import cuda
from numba.cuda import types as nt
for line in sys.stdin:
    req = json.loads(line)
    try:
        module = types.ModuleType("fusec_probe")
        exec(compile(req["source"], "<fusec probe>", "exec"), module.__dict__)
        sig = tuple(nt.Array(getattr(nt, t), n, "C") for n, t in req["signature"])
        ptx, _ = cuda.compile_ptx(getattr(module, req["name"]).py_func, sig,
                                  cc=tuple(req["cc"]))
        out = {"ptx": ptx}
    except Exception as err:
        out = {"error": f"{type(err).__name__}: {err}"[:2000],
               "environment": environmental(err)}
    print(json.dumps(out), flush=True)
"""

# Whether an exception from compiling a kernel to PTX is this machine's (no
# CUDA toolkit, libNVVM or NVRTC), not the kernel's: one classifier, shared
# with the other compiling subprocesses (`codegen/ptx.py`).
_ENVIRONMENT = "from fusec.codegen.compile_errors import environmental\n"


@dataclass(frozen=True)
class KernelCount:
    """What ptxas reports for one kernel, and how many threads it launches."""

    registers: int
    spill_bytes: int  # spill stores + spill loads, per thread
    threads: int


PROBE_BUDGET_S = 10.0
"""Seconds one compile may spend getting PTX from numba and counts from
ptxas (about 1 to 13 s a kernel on two cores: a bf16 GPT-2 block's five
GEMM stages took 67 s); past it, the estimate decides, with a note."""


@dataclass
class KernelProbe:
    """Counts kernels with ptxas, caching by source, within `budget_s`
    seconds (counts under a cap are always made); `seconds`, `compiled` and
    `cached` say what it cost, `note` why it stopped counting."""

    seconds: float = 0.0
    compiled: int = 0
    cached: int = 0
    note: str = ""
    budget_s: float = field(default_factory=lambda: PROBE_BUDGET_S)
    unavailable: bool = False  # no ptxas or no libNVVM: nothing can be counted

    def count(self, group: GroupOp, target: Target, cap: int = 0) -> KernelCount | None:
        """The ptxas count of `group`'s kernel on `target` (capped at `cap`
        registers when > 0); None, with `note` set, when it cannot be had."""
        if self.unavailable:
            return None
        # Under a cap the user set (`--max-registers`) every kernel is counted:
        # the cap is a promise about the real kernels, not the estimates.
        if not cap and self.seconds >= self.budget_s:
            self.note = self.note or (
                f"the compile's {self.budget_s:g} s for ptxas is spent "
                f"({counted(self.compiled, 'kernel')} counted); later groups are decided by the "
                "estimate")
            return None
        begin = time.perf_counter()
        try:
            kernel, signature = _generate(group, target)
            source = f"{kernel_prelude([kernel.text])}\n\n{kernel.text}\n"
            cc = target.compute_capability
            key = json.dumps([_without_comments(kernel.text), signature, cc, cap])
            threads = _threads(kernel)
            if key in _COUNTS:
                self.cached += 1
            else:
                _COUNTS[key] = _assemble(source, signature, cc, cap)
                self.compiled += 1
            regs, spills = _COUNTS[key]
            return KernelCount(regs, spills, threads)
        except ProbeUnavailable as err:
            self.note, self.unavailable = str(err), True
            return None
        except KernelDoesNotCompile as err:
            from fusec.codegen.generate import group_attr

            raise InternalError(f"kernel {kernel_name(group)} (group "
                                f"{group_attr(group, 'name', '?')}) does not compile: {err}") \
                from None
        finally:
            self.seconds += time.perf_counter() - begin

    def summary(self) -> str:
        """`ptxas counted 5 kernels (2 more from the cache) in 3.1 s`."""
        return (f"ptxas counted {counted(self.compiled, 'kernel')} ({self.cached} more from "
                "the cache) "
                f"in {self.seconds:.1f} s")


# (registers, spill bytes) per kernel key, for the whole process: a kernel met
# again (the same group in another compile, a stage that split the same way)
# is never assembled twice.
_COUNTS: dict[str, tuple[int, int]] = {}


class ProbeUnavailable(Exception):
    """ptxas or numba's PTX compiler (libNVVM) is missing or failed."""


class KernelDoesNotCompile(Exception):
    """numba rejected a generated kernel itself (a code-generation bug); the
    message is numba's first error line."""


def kernel_name(group: GroupOp) -> str:
    """The name the program's kernel for `group` gets (codegen/generate.py)."""
    from fusec.codegen.generate import KERNEL_NAME_FUNC_CHARS, group_attr, main_op

    func = group.parent_op()
    prefix = func.sym_name.data[:KERNEL_NAME_FUNC_CHARS] if isinstance(func, FuncOp) else "f"
    main = op.name.removeprefix("nn.") if (op := main_op(group)) else "copy"
    return f"{prefix}_{group_attr(group, 'name', '?')}_{main}"


def _without_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def _threads(kernel: KernelSource) -> int:
    g, b = kernel.grid, kernel.block
    return g[0] * g[1] * g[2] * b[0] * b[1] * b[2]


def _generate(group: GroupOp, target: Target) -> tuple[KernelSource, list[tuple[int, str]]]:
    """`group`'s kernel under its schedule (a clone of the group is scheduled
    for `target` when it has none yet), named `PROBE_KERNEL`."""
    from fusec.codegen.generate import group_attr, load_emitter
    from fusec.codegen.launch_grid import fit_grid
    from fusec.scheduling.choose import ensure_schedules

    clone = group.clone()
    ensure_schedules([clone], target)
    kernel = load_emitter(group_attr(clone, "kind", ""), clone)(clone, PROBE_KERNEL)
    kernel = fit_grid(kernel, target)
    return kernel, [(len(p.view_shape), numba_type(_param_dtype(group, kernel, p)))
                    for p in kernel.params]


def _param_dtype(group: GroupOp, kernel: KernelSource, param: KernelParam) -> str:
    """The device dtype a parameter binds (what the runtime passes)."""
    if param.role == "workspace":
        return kernel.workspaces[param.index].dtype
    values: tuple[SSAValue, ...] = group.inputs if param.role == "input" else group.outputs
    return value_dtype(values[param.index])


_worker: subprocess.Popen[str] | None = None


def _start_worker() -> subprocess.Popen[str]:
    global _worker
    if _worker is None or _worker.poll() is not None:
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
        _worker = subprocess.Popen([sys.executable, "-c", _ENVIRONMENT + _WORKER], env=env,
                                   text=True,
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        atexit.register(_stop_worker)
    return _worker


def _stop_worker() -> None:
    global _worker
    if _worker is not None and _worker.poll() is None:
        assert _worker.stdin is not None
        _worker.stdin.close()
        try:
            _worker.wait(timeout=5)
        except subprocess.TimeoutExpired:
            _worker.kill()
    if _worker is not None:  # its pipes too: an open one warns when collected
        for pipe in (_worker.stdout, _worker.stderr):
            if pipe is not None:
                pipe.close()
    _worker = None


def _ptx_of(source: str, signature: list[tuple[int, str]], cc: tuple[int, int]) -> str:
    worker = _start_worker()
    assert worker.stdin is not None and worker.stdout is not None
    request = {"source": source, "name": PROBE_KERNEL, "signature": signature, "cc": list(cc)}
    try:
        worker.stdin.write(json.dumps(request) + "\n")
        worker.stdin.flush()
        line = worker.stdout.readline()
    except OSError as err:
        raise ProbeUnavailable(f"the PTX compile worker stopped ({err})") from None
    if not line:
        tail = (worker.stderr.read() if worker.stderr else "").strip().splitlines()[-1:]
        _stop_worker()
        raise ProbeUnavailable(f"numba could not start compiling PTX ({' '.join(tail)})")
    reply = json.loads(line)
    if "error" in reply:
        if not reply.get("environment", True):
            raise KernelDoesNotCompile(first_error_line(reply["error"]))
        raise ProbeUnavailable(f"numba could not compile the kernel to PTX ({reply['error']})")
    return str(reply["ptx"])


def _assemble(source: str, signature: list[tuple[int, str]], cc: tuple[int, int],
              cap: int) -> tuple[int, int]:
    tool = shutil.which("ptxas")
    if tool is None:
        raise ProbeUnavailable("ptxas is not installed")
    ptx = _ptx_of(source, signature, cc)
    try:
        usage = ptxas_usage(ptx, tool, arch=f"sm_{cc[0]}{cc[1]}", max_registers=cap)
    except FusecError as err:
        raise ProbeUnavailable(str(err)) from None
    return usage["registers"], usage["spill_bytes"]
