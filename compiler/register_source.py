"""Where `--ptx-info` takes each kernel's real register count from.

- `ptxas`: the kernels compiled to PTX and assembled by `ptxas -v` for the
  compile's target (`-arch=sm_90` on h200, `Target.ptxas_arch`;
  `codegen/ptx.py`); no GPU needed. `spill_bytes` is ptxas's spill stores
  plus spill loads.
- `gpu`: the kernels compiled for the GPU that is present and read back from
  the driver (`codegen/gpu_registers.py`). `spill_bytes` is the local memory
  per thread, which is where spills go (the driver reports no spill count).
- `auto` (default): the GPU when one is present, else ptxas.

```python
counts = measure_registers(program, "auto")
counts.source            # "ptxas sm_90" or "gpu NVIDIA H200 (cc 9.0)"
counts.kernels["f_g0"]   # (registers, spill bytes)
```

The compile job writes `registers`, `spill_bytes` and `register_source` into
each plan.json launch it measured, and report.md shows them beside the
estimate (`est_registers`).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.program import Program
from fusec.analysis.targets import Target

if TYPE_CHECKING:  # imported when measuring: it pulls in numba's type system
    from fusec.codegen.gpu_registers import GpuUsage

REGISTER_SOURCES: tuple[str, ...] = ("auto", "ptxas", "gpu")


@dataclass(frozen=True)
class MeasuredRegisters:
    """Each measured kernel's (registers per thread, spill bytes) and their
    source; `note` says why nothing was measured when `kernels` is empty."""

    source: str = ""
    kernels: dict[str, tuple[int, int]] = field(default_factory=dict[str, tuple[int, int]])
    note: str = ""


def ptxas_source(target: Target) -> str:
    """`ptxas sm_90`: where counts assembled for `target` came from."""
    return f"ptxas {target.ptxas_arch}"


def from_ptxas(info: Mapping[str, Mapping[str, Any]], target: Target) -> MeasuredRegisters:
    """The counts of `compile_program_ptx`'s result for `target` (none where
    its counts are -1: ptxas was missing)."""
    kernels: dict[str, tuple[int, int]] = {}
    for kernel, entry in info.items():
        regs = int(entry.get("registers", -1))
        if regs >= 0:
            kernels[kernel] = (regs, max(0, int(entry.get("spill_bytes", 0))))
    return MeasuredRegisters(ptxas_source(target), kernels)


def from_gpu(usage: GpuUsage) -> MeasuredRegisters:
    """The counts of `gpu_kernel_usage`'s result: registers and local memory
    per thread."""
    return MeasuredRegisters(
        usage.source, {k: (u.registers, u.local_bytes) for k, u in usage.kernels.items()})


def resolve_source(source: str) -> str:
    """`ptxas` or `gpu`, the source `measure_registers` uses for a
    `--register-source` choice (`auto`: the GPU when one is present); a
    `FusecError` when the choice is unknown or names a missing tool or GPU."""
    if source not in REGISTER_SOURCES:
        raise FusecError(f"unknown register source '{source}' "
                         f"(expected one of: {', '.join(REGISTER_SOURCES)})")
    if source == "ptxas":
        if shutil.which("ptxas") is None:
            raise FusecError("--register-source ptxas: ptxas is not installed (it comes with "
                             "the CUDA toolkit); use --register-source gpu on a GPU machine")
        return source
    from fusec.codegen.gpu_registers import no_gpu_reason

    why = no_gpu_reason()
    if source == "gpu" and why:
        raise FusecError(f"--register-source gpu: no CUDA GPU is present ({why}); "
                         "use --register-source ptxas")
    return "ptxas" if why else "gpu"


def measure_registers(program: Program, source: str = "auto") -> MeasuredRegisters:
    """Compile every kernel of `program` and read its registers and spills
    from `source` (`auto`, `ptxas` or `gpu`); slow, so only on request.

    An explicit source that is not available is a `FusecError`; with `auto`
    a machine with neither a GPU nor ptxas measures nothing and says why."""
    chosen = resolve_source(source)
    from fusec.codegen.ptx import compile_program_ptx, program_signatures

    if not program_signatures(program):
        return MeasuredRegisters(note="no generated kernels to measure")
    if chosen == "gpu":
        from fusec.codegen.gpu_registers import gpu_kernel_usage

        return from_gpu(gpu_kernel_usage(program))
    if shutil.which("ptxas") is None:  # auto, without a GPU
        return MeasuredRegisters(note="not measured: no CUDA GPU is present and ptxas is "
                                 "not installed")
    return from_ptxas(compile_program_ptx(program), program.target)
