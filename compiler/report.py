"""`OUT/report.md`: what was fused, what it costs, and what was refused.

For each function: its kernels (group, ops, launch shape, estimates) and the
number of launches and HBM bytes before fusion (one kernel per op) and after.

- *Before* counts every `nn` op of the final module except `nn.constant`
  (data) and `nn.reshape` (a view): one launch each, moving its operands and
  its result through HBM once.
- *After* counts the program's launches; a launch's HBM bytes are the
  estimate code generation recorded (`KernelLaunch.hbm_bytes`) or else the
  bytes of every argument it reads or writes.

With `--ptx-info` each kernel row also shows the measured registers and
spill bytes beside the estimate, and the source they came from (`ptxas
sm_90`: ptxas for the target's architecture, or the GPU present:
`compiler/register_source.py`). A kernel that spills gets a line under its
function's table with the remark that explains it (register-budget's
`... has no legal split point: ptxas may spill`), or says that none does.

Fusion decisions and refused fusions are rendered from the remarks the fusion
pass stores on the module (`fusion.remarks`: `remark:`/`note:` lines, and
`missed:` lines for refusals); when there are none the report says why
(fusion off, or no decisions recorded).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from xdsl.dialects.builtin import IntegerType, ModuleOp, TensorType
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, Operation

from fusec.analysis.diagnostics import counted
from fusec.analysis.program import FunctionProgram, KernelLaunch, Program
from fusec.analysis.remarks import collect_remarks
from fusec.compiler.register_source import MeasuredRegisters
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp, YieldOp

# Ops that never become kernels of their own.
_NOT_KERNELS: tuple[type[Operation], ...] = (nn.ConstantOp, nn.ReshapeOp)


@dataclass(frozen=True)
class Traffic:
    """Kernel launches and the HBM bytes they move."""

    launches: int
    hbm_bytes: int


@dataclass(frozen=True)
class ReportInputs:
    """What the report is rendered from."""

    source_name: str
    module: ModuleOp
    program: Program
    fusion: bool  # asked for on the command line
    fusion_pass_ran: bool  # form-fusion-groups was available and ran
    target: str
    passes: tuple[str, ...]
    registers: MeasuredRegisters  # kernel -> (registers, spill bytes), if measured
    pipeline: str = ""  # the spec that ran: `fusec MODEL -p '<it>'` replays it


def type_bytes(t: Attribute) -> int:
    """Bytes of a statically shaped tensor type (i1 and bool as one byte)."""
    if not isinstance(t, TensorType):
        return 0
    n = 1
    for d in t.get_shape():
        n *= max(int(d), 0)
    element = t.element_type
    if isinstance(element, IntegerType):
        bits = element.width.data
    else:
        bits = int(getattr(element, "bitwidth", 32))
    return n * max(1, bits // 8)


def _nn_ops(op: Operation) -> Iterator[Operation]:
    for region in op.regions:
        for block in region.blocks:
            for inner in block.ops:
                if isinstance(inner, GroupOp):
                    yield from _nn_ops(inner)
                elif inner.name.startswith("nn.") and not isinstance(inner, YieldOp):
                    yield inner


def unfused_traffic(func: FuncOp) -> Traffic:
    """Launches and HBM bytes if every op were its own kernel."""
    launches = hbm = 0
    for op in _nn_ops(func):
        if isinstance(op, _NOT_KERNELS):
            continue
        launches += 1
        hbm += sum(type_bytes(v.type) for v in (*op.operands, *op.results))
    return Traffic(launches, hbm)


def launch_bytes(fp: FunctionProgram, launch: KernelLaunch) -> int:
    """HBM bytes of one launch: its recorded estimate, else its arguments' bytes."""
    if launch.hbm_bytes:
        return launch.hbm_bytes
    return sum(fp.values[a.value].nbytes for a in launch.args if a.value in fp.values)


def fused_traffic(fp: FunctionProgram) -> Traffic:
    """Launches and HBM bytes of the compiled program."""
    return Traffic(len(fp.launches), sum(launch_bytes(fp, launch) for launch in fp.launches))


def remarks(module: ModuleOp) -> list[str]:
    """The remark lines the fusion pass stored on `module` (`fusion.remarks`)."""
    return collect_remarks(module)


def _functions(module: ModuleOp) -> dict[str, FuncOp]:
    return {op.sym_name.data: op for op in module.ops if isinstance(op, FuncOp)}


def render_report(r: ReportInputs) -> str:
    """The text of report.md."""
    funcs = _functions(r.module)
    lines = [
        f"# fusec report: {r.source_name}",
        "",
        f"- target: `{r.target}`",
        f"- fusion: {'on' if r.fusion else 'off (--no-fusion)'}",
        f"- passes: {', '.join(f'`{p}`' for p in r.passes)}",
        *([f"- pipeline (`fusec MODEL -p '<it>'` replays it): `{r.pipeline}`"]
          if r.pipeline else []),
        f"- registers: {_register_source(r.registers)}",
        "",
        "## Summary",
        "",
        "| function | launches before | launches after | HBM bytes before | HBM bytes after |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, fp in r.program.functions.items():
        before = unfused_traffic(funcs[name]) if name in funcs else Traffic(0, 0)
        after = fused_traffic(fp)
        lines.append(
            f"| @{name} | {before.launches} | {after.launches} | "
            f"{before.hbm_bytes:,} | {after.hbm_bytes:,} |"
        )
    lines.append("")
    lines.append("Before: one kernel per op (constants and reshapes excluded). "
                 "After: the launches of kernels.py.")
    notes = remarks(r.module)
    symbols = device_symbols(r.program)
    for fp in r.program.functions.values():
        lines += ["", *_function_section(fp, r.registers, notes),
                  *_device_symbols(fp, symbols)]
    lines += ["", *_decisions(r)]
    return "\n".join(lines).rstrip("\n") + "\n"


def device_symbols(program: Program) -> dict[str, str]:
    """Each kernel's name on the GPU (in Nsight Systems or `torch.profiler`):
    a kernel is compiled, and named, by its code (`codegen/kernel_unit.py`),
    so equal kernels share one name. kernels.py is cut up once for all
    functions."""
    from fusec.codegen.kernel_unit import units_of_source

    names = list(dict.fromkeys(la.kernel for fp in program.functions.values()
                               for la in fp.launches if la.library is None))
    if not names:
        return {}
    return {k: u.name for k, u in units_of_source(program.kernels_source, names).items()}


def _device_symbols(fp: FunctionProgram, symbols: dict[str, str]) -> list[str]:
    """Which kernels of `fp` each device symbol is (`device_symbols`)."""
    names = list(dict.fromkeys(la.kernel for la in fp.launches if la.library is None))
    if not names:
        return []
    behind: dict[str, list[str]] = {}
    for kernel in names:
        behind.setdefault(symbols[kernel], []).append(kernel)
    lines = ["", "On the GPU each distinct kernel is named by its code (profilers show "
             "`fusec_unit::<symbol>`):", "", "| device symbol | kernels |", "|---|---|"]
    lines += [f"| `{symbol}` | {', '.join(f'`{k}`' for k in kernels)} |"
              for symbol, kernels in behind.items()]
    return lines


def _register_source(registers: MeasuredRegisters) -> str:
    if registers.source:
        return f"estimated, and measured by `{registers.source}` (`--ptx-info`)"
    if registers.note:
        return f"estimated; {registers.note}"
    return "estimated (measure them with `--ptx-info`)"


def _measured_columns(registers: MeasuredRegisters) -> tuple[str, str]:
    """The headers of the measured registers and spills: the GPU reports
    local memory per thread, which holds the spills."""
    if registers.source.startswith("gpu"):
        return "registers (GPU)", "local bytes (spills)"
    return "registers (ptxas)", "spill bytes"


def _function_section(fp: FunctionProgram, registers: MeasuredRegisters,
                      notes: list[str]) -> list[str]:
    regs_header, spill_header = _measured_columns(registers)
    lines = [
        f"## @{fp.name}",
        "",
        "| # | kernel | group | ops | grid | block | shared bytes | est. registers "
        f"| {regs_header} | {spill_header} | HBM bytes | est. time (us) |",
        "|---:|---|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for i, launch in enumerate(fp.launches):
        measured = registers.kernels.get(launch.kernel) if launch.library is None else None
        regs, spill = (str(measured[0]), str(measured[1])) if measured else ("-", "-")
        lines.append(
            f"| {i} | `{launch.kernel}` | {launch.group} | {', '.join(launch.ops)} | "
            f"{_dims(launch.grid)} | {_dims(launch.block)} | {launch.shared_bytes} | "
            f"{launch.est_registers or '-'} | {regs} | {spill} | "
            f"{launch_bytes(fp, launch):,} | {_time(launch.est_time_us)} |"
        )
    if not fp.launches:
        lines.append("| - | (no kernels: the outputs are inputs, constants or views) "
                     "| | | | | | | | | | |")
    else:
        total_bytes = sum(launch_bytes(fp, launch) for launch in fp.launches)
        total_us = sum(launch.est_time_us for launch in fp.launches)
        lines.append(f"| | **total** ({counted(len(fp.launches), 'launch', 'launches')}) "
                     "| | | | | | | | | "
                     f"{total_bytes:,} | {_time(total_us)} |")
    reasons = spill_reasons(fp, registers, notes)
    if reasons:
        lines += ["", f"Kernels that spill ({spill_header}, by `{registers.source}`):", ""]
        lines += [f"- `{kernel}`: {registers.kernels[kernel][1]} bytes; "
                  + (reason or "no remark explains why.") for kernel, reason in reasons.items()]
    return lines


def spill_reasons(fp: FunctionProgram, registers: MeasuredRegisters,
                  notes: list[str]) -> dict[str, str]:
    """Each measured kernel of `fp` that spills, with the remark about its
    group that says why ("" when none does)."""
    out: dict[str, str] = {}
    for launch in fp.launches:
        measured = registers.kernels.get(launch.kernel)
        if launch.library is not None or measured is None or measured[1] <= 0:
            continue
        group = re.compile(rf"\bgroup {re.escape(launch.group)}\b") if launch.group else None
        out[launch.kernel] = next(
            (note for note in notes if group and group.search(note) and _SPILL.search(note)), "")
    return out


# "may spill", "spills"; not the cost model's "T_spill 0.0" in every fusion remark.
_SPILL = re.compile(r"\bspill")


def _dims(d: tuple[int, ...]) -> str:
    return "×".join(str(x) for x in d)


def _time(us: float) -> str:
    return f"{us:.2f}" if us else "-"


def _decisions(r: ReportInputs) -> list[str]:
    """Every remark, grouped by the group it names (a large model has
    thousands), then the refusals counted per group."""
    found = remarks(r.module)
    by_group = remarks_by_group(found)
    lines = ["## Fusion decisions", ""]
    if not found:
        lines.append(_no_decisions(r))
    for key, group_lines in by_group.items():
        refused = sum(line.startswith("missed:") for line in group_lines)
        counts = f" ({len(group_lines) - refused} accepted, {refused} refused)"
        lines += [f"### {key}{counts if key != 'notes' else ''}", ""]
        lines += [f"- {line}" for line in group_lines]
        lines.append("")
    lines += ["## Refused fusions", ""]
    counts = {key: n for key, group_lines in by_group.items()
              if (n := sum(line.startswith("missed:") for line in group_lines))}
    if counts:
        lines.append(f"{sum(counts.values())} refused (each listed above, with its reason): "
                     + ", ".join(f"{key}: {n}" for key, n in counts.items()) + ".")
    elif found:
        lines.append("None: every candidate fusion was accepted.")
    else:
        lines.append(_no_decisions(r))
    return lines


_GROUP_NAME = re.compile(r"\bgroup (g\d+)\b")


def remarks_by_group(lines: list[str]) -> dict[str, list[str]]:
    """Remark lines keyed `notes`, `group gN` (in order of first mention), then
    `ops left alone` (refusals whose target ended up in no group)."""
    notes = [line for line in lines if line.startswith("note:")]
    grouped: dict[str, list[str]] = {"notes": notes} if notes else {}
    alone: list[str] = []
    for line in lines:
        if line.startswith("note:"):
            continue
        match = _GROUP_NAME.search(line)
        if match:
            grouped.setdefault(f"group {match[1]}", []).append(line)
        else:
            alone.append(line)
    if alone:
        grouped["ops left alone"] = alone
    return grouped


def _no_decisions(r: ReportInputs) -> str:
    if not r.fusion:
        return "Fusion off (`--no-fusion`): every op is its own kernel; no fusion was considered."
    if not r.fusion_pass_ran:
        return ("No fusion decisions recorded: the `form-fusion-groups` pass is not "
                "available, so every op is its own kernel.")
    return "No fusion decisions recorded."
