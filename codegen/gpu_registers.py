"""Read each generated kernel's register use from the GPU that is present.

`codegen/ptx.py` asks ptxas for the target's architecture (no GPU needed); this module asks
the CUDA driver for the kernel as compiled for the device actually in the
machine. numba compiles each kernel with its launch signature
(`program_signatures`) and loads it, and the driver reports, per kernel:

- `registers`: registers per thread;
- `local_bytes`: local memory per thread: spill slots plus any stack frame
  (the driver does not tell the two apart; the generated kernels keep no
  local arrays, so non-zero means spills);
- `shared_bytes`: static shared memory per block (dynamic shared memory is the
  launch's `shared_bytes` in plan.json);
- `max_threads_per_block`: the largest block the kernel can be launched with.

numba picks GPU or simulator once per process, so, as for ptxas, the kernels
are compiled in a subprocess whose environment has `NUMBA_ENABLE_CUDASIM`
removed. `fusec run --registers` measures in its own process instead
(`measure_kernels`): the runtime has compiled the kernels for the GPU already.

```python
usage = gpu_kernel_usage(program)   # FusecError when no CUDA GPU is present,
                                    # InternalError for a kernel numba rejects
usage.source                        # "gpu NVIDIA H200 (cc 9.0)"
usage.kernels["f_g0_add"]           # KernelUsage(registers=10, local_bytes=0, ...)
```
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.gpu_driver import gpu_probe
from fusec.analysis.program import KernelLaunch, Program
from fusec.codegen.compile_errors import exit_for_kernel_error
from fusec.codegen.ptx import (
    Signature,
    kernel_workdir,
    program_signatures,
    run_without_simulator,
)

# The driver imports fusec itself (installed, or on the inherited PYTHONPATH),
# so the subprocess and `fusec run --registers` read the kernels the same way.
_DRIVER = r"""
import sys
from fusec.codegen.gpu_registers import driver_main
driver_main(sys.argv[1])
"""


@dataclass(frozen=True)
class KernelUsage:
    """What the driver reports for one kernel compiled for the present GPU."""

    registers: int
    local_bytes: int
    shared_bytes: int
    max_threads_per_block: int


@dataclass(frozen=True)
class GpuUsage:
    """The device the kernels were compiled for, and each kernel's usage."""

    device: str
    cc: tuple[int, int]
    kernels: dict[str, KernelUsage] = field(default_factory=dict[str, KernelUsage])

    @property
    def source(self) -> str:
        """Where the counts came from, as plan.json's `register_source` says it."""
        return f"gpu {self.device} (cc {self.cc[0]}.{self.cc[1]})"

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "cc": list(self.cc),
                "kernels": {k: asdict(u) for k, u in sorted(self.kernels.items())}}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> GpuUsage:
        major, minor = (int(x) for x in data["cc"])
        kernels = {str(k): KernelUsage(**{f: int(v[f]) for f in _USAGE_FIELDS})
                   for k, v in data["kernels"].items()}
        return GpuUsage(str(data["device"]), (major, minor), kernels)


_USAGE_FIELDS = ("registers", "local_bytes", "shared_bytes", "max_threads_per_block")


def numba_signature(signature: Signature) -> tuple[Any, ...]:
    """The numba argument types of a launch signature: C-contiguous arrays,
    the types the runtime's contiguous views have."""
    from numba import types

    return tuple(types.Array(getattr(types, t), ndim, "C") for ndim, t in signature)


def measure_kernels(cuda: Any, module: object,
                    signatures: Mapping[str, Signature]) -> GpuUsage:
    """Compile (or reuse the compiled) kernels of `module` for the current
    device of `cuda` (numba.cuda driving a GPU) and read their usage."""
    kernels: dict[str, KernelUsage] = {}
    for name, signature in sorted(signatures.items()):
        dispatcher = getattr(module, name, None)
        if dispatcher is None:
            raise FusecError(f"kernels.py has no kernel '{name}'")
        compiled = _compiled_variant(dispatcher, numba_signature(signature))
        kernels[name] = KernelUsage(
            registers=int(compiled.regs_per_thread),
            local_bytes=int(compiled.local_mem_per_thread),
            shared_bytes=int(compiled.shared_mem_per_block),
            max_threads_per_block=int(compiled.max_threads_per_block),
        )
    device = cuda.get_current_device()
    name = device.name.decode() if isinstance(device.name, bytes) else str(device.name)
    major, minor = (int(x) for x in device.compute_capability)
    return GpuUsage(name, (major, minor), kernels)


def _compiled_variant(dispatcher: Any, sig: tuple[Any, ...]) -> Any:
    """The variant of `dispatcher` for `sig`: the one already compiled (by a
    launch: the runtime's only variant per kernel, even should its argument
    types differ from `sig` in some flag), else compiled now."""
    overloads: Mapping[Any, Any] = getattr(dispatcher, "overloads", {})
    if sig in overloads:
        return overloads[sig]
    if len(overloads) == 1:
        return next(iter(overloads.values()))
    return dispatcher.compile(sig)


def driver_main(work: str) -> None:
    """The subprocess: load `work`/kernels.py, measure the kernels named in
    `work`/signatures.json, print the `GpuUsage` as one JSON line."""
    import importlib.util

    from numba import cuda

    spec = importlib.util.spec_from_file_location("fusec_gpu_kernels", f"{work}/kernels.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        exit_for_kernel_error(None, err)
    signatures = json.loads(Path(work, "signatures.json").read_text(encoding="utf-8"))
    # Compiled first, one by one, so that a kernel numba rejects is named
    # (measure_kernels then reuses the compiled variants).
    for name, signature in sorted(signatures.items()):
        dispatcher = getattr(module, name, None)
        try:
            if dispatcher is not None:
                dispatcher.compile(numba_signature(signature))
        except Exception as err:
            exit_for_kernel_error(name, err)
    usage = measure_kernels(cuda, module, signatures)
    print(json.dumps(usage.to_json()), flush=True)


def _run_driver(source: str, signatures: Mapping[str, Signature],
                groups: Mapping[str, str]) -> str:
    """The driver's stdout, run in a process without the simulator."""
    with kernel_workdir(source, signatures, "fusec-gpu-registers-") as work:
        return run_without_simulator(_DRIVER, work, "for the GPU", groups)


def parse_driver_output(stdout: str) -> GpuUsage:
    """The `GpuUsage` the driver printed (its last line: numba or the kernels
    may print before it)."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    try:
        return GpuUsage.from_json(json.loads(lines[-1]))
    except (IndexError, KeyError, TypeError, ValueError) as err:
        raise FusecError(f"cannot read the GPU's register report ({type(err).__name__}: "
                         f"{err}): {stdout[-200:]!r}") from None


def no_gpu_reason() -> str:
    """Why there is no usable GPU ("" when there is one), asked of the driver
    library so that numba.cuda stays unimported."""
    ok, why = gpu_probe()
    return "" if ok else why


def gpu_kernel_usage(program: Program) -> GpuUsage:
    """Every kernel of `program` compiled for the present GPU, with its usage;
    a `FusecError` saying so when there is no CUDA GPU."""
    why = no_gpu_reason()
    if why:
        raise FusecError(f"no CUDA GPU is present ({why}); ptxas counts registers without "
                         "one (`codegen/ptx.py`)")
    signatures = program_signatures(program)
    if not signatures:
        return GpuUsage("", (0, 0))
    groups = {la.kernel: la.group for fp in program.functions.values() for la in fp.launches}
    return parse_driver_output(_run_driver(program.kernels_source, signatures, groups))


_TABLE_COLUMNS = ("est. registers", "registers", "est. error", "local bytes",
                  "static shared bytes", "max threads/block")


def usage_table(launches: Iterable[KernelLaunch], usage: GpuUsage) -> list[str]:
    """One row per measured kernel (in launch order): the estimate beside
    the GPU's registers, the estimate's error, local memory per thread
    (spills), static shared memory per block and the largest block."""
    rows: dict[str, tuple[str, ...]] = {}
    for launch in launches:
        measured = usage.kernels.get(launch.kernel)
        if launch.library is not None or measured is None or launch.kernel in rows:
            continue
        est, real = launch.est_registers, measured.registers
        error = f"{(est - real) / real:+.0%}" if est and real else "-"
        rows[launch.kernel] = (str(est or "-"), str(real), error, str(measured.local_bytes),
                               str(measured.shared_bytes), str(measured.max_threads_per_block))
    width = max([len("kernel"), *map(len, rows)])
    lines = [f"registers per kernel on {usage.device} (cc {usage.cc[0]}.{usage.cc[1]}):",
             f"{'kernel':<{width}}  " + "  ".join(_TABLE_COLUMNS)]
    lines += [f"{kernel:<{width}}  " + "  ".join(f"{cell:>{len(head)}}" for cell, head
                                                 in zip(row, _TABLE_COLUMNS, strict=True))
              for kernel, row in rows.items()]
    return lines
