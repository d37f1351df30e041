"""The real register count of one group's kernel, before the program exists:
the group's kernel generated the normal way, compiled to PTX by numba for the
target's compute capability and assembled by `ptxas -v` (optionally under
`-maxrregcount N`, what `--max-registers N` caps every kernel at).

`register-budget` asks this when the estimate alone cannot decide (within
25% of the budget, or under a cap). The kernel is compiled as the unit the
runtime compiles (`codegen/kernel_unit.py`), through `codegen/build_pool.py`:
in the clean build workers, in parallel (`prefetch` hands every group the
pass will count to the workers before it counts the first), once per
distinct kernel, and kept in the kernel cache with its counts, its PTX and
its cubin. So a kernel met again (another group of the same body, another
compile, another process) is neither compiled nor assembled again, and the
code the probe built is the code the runtime loads.

```python
probe = KernelProbe()
probe.prefetch(groups, target, cap=32)       # builds start in the workers
count = probe.count(group, target, cap=32)   # None: no ptxas or no NVVM (probe.note says so)
count.registers, count.spill_bytes, count.threads
```

A kernel numba itself rejects (it cannot type or lower it) is a bug in code
generation, not a missing tool: `count` raises an `InternalError` naming the
kernel, its group and numba's first error line, and fusec stops.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import time
import weakref
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from xdsl.dialects.func import FuncOp
from xdsl.ir import SSAValue

from fusec.analysis.device_dtypes import numba_type, value_dtype
from fusec.analysis.diagnostics import InternalError, counted
from fusec.analysis.group_kind import group_backend
from fusec.analysis.targets import Target
from fusec.codegen.build_pool import (
    BuildFailed,
    Built,
    kernel_code,
    known_code,
    simulating,
    workers_running,
)
from fusec.codegen.compile_errors import first_error_line
from fusec.codegen.generate import KERNEL_NAME_FUNC_CHARS, group_attr, main_op
from fusec.codegen.kernel_source import KernelParam, KernelSource, capped
from fusec.codegen.kernel_unit import KernelUnit, unit_of_kernel
from fusec.codegen.launch_grid import fit_grid, launch_register_cap
from fusec.codegen.writers import ValueId, WriteTask, writer_for
from fusec.dialects.fusion import GroupOp
from fusec.scheduling.group_plan import group_plan

PROBE_KERNEL = "probe_kernel"  # the generated kernel's name (its unit's name is the placeholder)


@dataclass(frozen=True)
class KernelCount:
    """What ptxas reports for one kernel, and how many threads it launches."""

    registers: int
    spill_bytes: int  # spill stores + spill loads, per thread
    threads: int


PROBE_BUDGET_S = 3.0
"""Seconds one compile may wait for PTX from numba and counts from ptxas
(about 1 to 13 s a kernel on two cores: a bf16 GPT-2 block's five GEMM
stages took 67 s); past it, the estimate decides, with a note. The builds it
stops waiting for finish in the workers and are kept, so the next compile
reads their counts. 3 s keeps a cold compile of a 12-layer GPT-2 near 5 s on
two cores (10 s made it 14 s, with the same kernels.py)."""


_SPECULATED: weakref.WeakSet[GroupOp] = weakref.WeakSet()
"""Groups whose kernel `speculate` asked for already, by identity: one
asked for by fuse-attention (an attention group, which no later pass
changes) is not generated again by register-budget (80 ms per attention
group of GPT-2, on 2 cores). A group changed after it was asked for is not
asked for again; its kernel is then built when the compile ends. (A
fingerprint of the group, `group_memo.fingerprint`, would not do: the passes
between rebuild the ops of an unchanged attention group.)"""


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

    _generated: dict[int, tuple[GroupOp, KernelSource, list[tuple[int, str]]]] = \
        field(default_factory=dict, repr=False)
    _submitted: set[int] = field(default_factory=set, repr=False)  # futures this probe built
    _futures: list[Future[Built]] = field(default_factory=list, repr=False)

    def prefetch(self, groups: Sequence[GroupOp], target: Target, cap: int = 0) -> None:
        """Start building the kernels of `groups` in the workers, all at once,
        so that the `count`s that follow wait for the slowest, not the sum.
        Nothing is started past the time budget (without a cap), or when
        there is no ptxas to count with."""
        if self.unavailable or (not cap and self.seconds >= self.budget_s) or not groups:
            return
        if shutil.which("ptxas") is None:
            return  # `count` says so
        begin = time.perf_counter()
        try:
            for group in groups:
                try:
                    self._future(group, target, cap)
                except KernelDoesNotCompile:
                    continue  # `count` reports it, for the group it belongs to
        finally:
            self.seconds += time.perf_counter() - begin

    def speculate(self, groups: Sequence[GroupOp], target: Target, cap: int = 0) -> int:
        """Start building, without counting or waiting, the kernels `groups`
        will most likely have: each group's kernel as its schedule stands now,
        declared as the program will declare it (`launch_register_cap`), so
        that the runtime's build of that kernel is already running when the
        compile ends (GPT-2's attention kernel, the longest build of its cold
        first call, started 2.6 s earlier on an H100). A later pass that
        changes a kernel makes its build wasted work in a worker, never a
        wrong kernel: builds are keyed by the kernel's text. Only for a
        process that builds kernels anyway (its workers run, and numba's
        target here is the GPU's, not the simulator's); returns how many
        builds were asked for (0 without ptxas or workers)."""
        groups = [g for g in groups if g not in _SPECULATED]
        if self.unavailable or not groups or not workers_running() or simulating() or \
                shutil.which("ptxas") is None:
            return 0
        units: dict[str, tuple[KernelUnit, list[tuple[int, str]], str]] = {}
        for group in groups:
            _SPECULATED.add(group)
            try:
                kernel, signature = _generate(group, target)
                kernel = capped(kernel, launch_register_cap(kernel, target, cap))
                unit = unit_of_kernel(kernel.text, kernel.name)
            except Exception:  # a library call, or a kernel the real generation
                continue       # reports: a guess is never an error
            units.setdefault(unit.source, (unit, signature, kernel_name(group)))
        # the longest texts first: they take the longest to build
        for source in sorted(units, key=len, reverse=True):
            unit, signature, label = units[source]
            kernel_code(unit, signature, target.compute_capability, label)
        return len(units)

    def count(self, group: GroupOp, target: Target, cap: int = 0) -> KernelCount | None:
        """The ptxas count of `group`'s kernel on `target` (capped at `cap`
        registers when > 0); None, with `note` set, when it cannot be had."""
        if self.unavailable:
            return None
        # Under a cap the user set (`--max-registers`) every kernel is counted:
        # the cap is a promise about the real kernels, not the estimates.
        if not cap and self.seconds >= self.budget_s:
            return self._known(group, target)
        begin = time.perf_counter()
        kernel: KernelSource | None = None
        try:
            if shutil.which("ptxas") is None:
                raise ProbeUnavailable("ptxas is not installed")
            future, kernel = self._future(group, target, cap)
            # Without a cap, wait no longer than the budget left: a build that
            # misses it goes on in its worker and is kept for the next compile.
            # (an unbounded budget waits as long as the build takes: no timeout)
            left = self.budget_s - self.seconds
            wait = None if cap or math.isinf(left) else max(0.0, left)
            try:
                built = _result(future, wait)
            except TimeoutError:
                self.note = self.note or (
                    f"the compile's {self.budget_s:g} s for ptxas is spent "
                    f"({counted(self.compiled, 'kernel')} counted); later groups are decided "
                    "by the estimate")
                self.drop_pending()
                return None
            if id(future) in self._submitted:
                self._submitted.discard(id(future))
                self.compiled += 1
            else:
                self.cached += 1
            code = built.code
            if code.registers is None:
                raise ProbeUnavailable("ptxas did not assemble the kernel's PTX")
            return KernelCount(code.registers, code.spill_bytes or 0, _threads(kernel))
        except ProbeUnavailable as err:
            self.note, self.unavailable = str(err), True
            return None
        except KernelDoesNotCompile as err:
            raise InternalError(f"kernel {kernel_name(group)} (group "
                                f"{group_attr(group, 'name', '?')}) does not compile: {err}") \
                from None
        finally:
            self.seconds += time.perf_counter() - begin

    def _known(self, group: GroupOp, target: Target) -> KernelCount | None:
        """The count of `group`'s kernel where it was built already (in
        this process or the kernel cache) once the time for ptxas is spent
        or was none (`budget_s` 0): no build starts, the estimate decides
        the rest, and `note` says so."""
        begin = time.perf_counter()
        try:
            if shutil.which("ptxas") is not None:
                kernel, unit, signature = self._unit(group, target, 0)
                built = known_code(unit, signature, target.compute_capability,
                                   kernel_name(group))
                if built is not None and built.code.registers is not None:
                    self.cached += 1
                    return KernelCount(built.code.registers, built.code.spill_bytes or 0,
                                       _threads(kernel))
        except KernelDoesNotCompile:
            pass  # only a build says so: the estimate decides
        finally:
            self.seconds += time.perf_counter() - begin
        self.note = self.note or (
            f"the compile's {self.budget_s:g} s for ptxas is spent "
            f"({counted(self.compiled, 'kernel')} counted); later groups are decided by the "
            "estimate" if self.budget_s > 0 else
            "this compile waits for no kernel build (ptxas_wait=0): only kernels built "
            "before, in the kernel cache, are counted")
        return None

    def drop_pending(self) -> None:
        """Cancel the prefetched builds no worker has begun (their counts
        will not be asked for: the budget is spent), so the workers leave
        the cores to the rest of the compile."""
        for future in self._futures:
            future.cancel()
        self._futures.clear()

    def _future(self, group: GroupOp, target: Target,
                cap: int) -> tuple[Future[Built], KernelSource]:
        """The build of `group`'s kernel (started now, or earlier by
        `prefetch` or another compile), and the kernel."""
        kernel, unit, signature = self._unit(group, target, cap)
        future = kernel_code(unit, signature, target.compute_capability,
                             kernel_name(group))
        if not future.done():
            self._submitted.add(id(future))
            self._futures.append(future)
        return future, kernel

    def _unit(self, group: GroupOp, target: Target, cap: int
              ) -> tuple[KernelSource, KernelUnit, list[tuple[int, str]]]:
        """`group`'s kernel (generated once per group) and its build unit."""
        held = self._generated.pop(id(group), None)
        if held is not None and held[0] is group:
            kernel, signature = held[1], held[2]
        else:
            kernel, signature = _generate(group, target)
        self._generated[id(group)] = (group, kernel, signature)
        unit = dataclasses.replace(unit_of_kernel(kernel.text, kernel.name), max_registers=cap)
        return kernel, unit, signature

    def summary(self) -> str:
        """`ptxas counted 5 kernels (2 more from the cache) in 3.1 s`."""
        return (f"ptxas counted {counted(self.compiled, 'kernel')} ({self.cached} more from "
                "the cache) "
                f"in {self.seconds:.1f} s")


class ProbeUnavailable(Exception):
    """ptxas or numba's PTX compiler (libNVVM) is missing or failed."""


class KernelDoesNotCompile(Exception):
    """numba rejected a generated kernel itself (a code-generation bug); the
    message is numba's first error line."""


def kernel_name(group: GroupOp) -> str:
    """The name the program's kernel for `group` gets (codegen/generate.py)."""
    func = group.parent_op()
    prefix = func.sym_name.data[:KERNEL_NAME_FUNC_CHARS] if isinstance(func, FuncOp) else "f"
    main = op.name.removeprefix("nn.") if (op := main_op(group)) else "copy"
    return f"{prefix}_{group_attr(group, 'name', '?')}_{main}"


def _threads(kernel: KernelSource) -> int:
    g, b = kernel.grid, kernel.block
    return g[0] * g[1] * g[2] * b[0] * b[1] * b[2]


def _generate(group: GroupOp, target: Target) -> tuple[KernelSource, list[tuple[int, str]]]:
    """`group`'s kernel under its schedule (a clone of the group is scheduled
    for `target` when it has none yet), named `PROBE_KERNEL`."""
    from fusec.analysis.schedule_choice import ensure_schedules

    clone = group.clone()
    ensure_schedules([clone], target)
    name = group_attr(clone, "name", "?")
    with group_plan(clone, target) as plan:
        written = writer_for(clone).write(WriteTask(plan, PROBE_KERNEL, name, _local_ids(),
                                                    target))
    if not isinstance(written, KernelSource):
        raise InternalError(f"group {name} runs on backend \"{group_backend(clone)}\", "
                            "which writes no kernel for ptxas to count")
    kernel = fit_grid(written, target)
    return kernel, [(len(p.view_shape), numba_type(_param_dtype(group, kernel, p)))
                    for p in kernel.params]


def _local_ids() -> ValueId:
    """Value ids for a writer that names values itself (a library call):
    a probed group has no program around it, so its own `v0`, `v1`, ..."""
    ids: dict[SSAValue, str] = {}
    return lambda value, where: ids.setdefault(value, f"v{len(ids)}")


def _param_dtype(group: GroupOp, kernel: KernelSource, param: KernelParam) -> str:
    """The device dtype a parameter binds (what the runtime passes)."""
    if param.role == "workspace":
        return kernel.workspaces[param.index].dtype
    values: tuple[SSAValue, ...] = group.inputs if param.role == "input" else group.outputs
    return value_dtype(values[param.index])


def _result(future: Future[Built], timeout: float | None) -> Built:
    """The build's result (TimeoutError past `timeout` seconds), its failure
    said as the probe says it."""
    try:
        return future.result(timeout)
    except BuildFailed as err:
        if not err.environmental:
            raise KernelDoesNotCompile(first_error_line(err.message)) from None
        raise ProbeUnavailable(f"numba could not compile the kernel to PTX ({err.message})") \
            from None
