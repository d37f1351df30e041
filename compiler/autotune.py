"""Autotuning (`fusec MODEL -o OUT --autotune`, `fusec.compile(..., autotune=True)`).

After the pipeline, for each group (library GEMMs aside):

1. its candidate schedules (`scheduling/candidates.py`: the model's choice
   and up to top-k - 1 alternatives) each become a trial function of one
   tuning module (`compiler/tuning_trials.py`), generated once and compiled
   in parallel;
2. each trial is timed on the device at the real shapes with fresh random
   inputs (`runtime/tuning_timer.py`: CUDA events, warm-up, the median of
   several repeats); the fastest schedule is kept;
3. a *contested* fused group, one of several ops whose estimate is within
   `contested_ratio` of its split parts' either way or whose arithmetic
   intensity is above `contested_intensity` FLOP/B, is also timed split (the
   same ops as separate groups, as `group-each-op` makes them, each with its
   best schedule); when the split parts' sum is faster, the group is split in
   the output, with a remark giving both times. Single-op groups, attention
   groups and library GEMMs are never contested;
4. the result per group is kept in the tuning cache (`runtime/tuning_cache.py`),
   keyed by device, target and the group's fingerprint, so a later compile
   of the same group times nothing.

The results go to plan.json (`measured_us`, `tuned_candidates` per launch)
and to report.md's "Autotuning" section.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.program import FunctionProgram, Program
from fusec.analysis.remarks import RemarkCollector
from fusec.analysis.targets import Target
from fusec.compiler.tuning_trials import (
    contest,
    fingerprint,
    group_name,
    schedule_from_json,
    schedule_json,
    schedule_text,
    split_group,
    split_parts,
    trial_function,
)
from fusec.dialects.fusion import GroupOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.schedule import SCHEDULE_KEY, ScheduleAttr
from fusec.runtime.tuning_cache import TuningCache, tuning_key
from fusec.runtime.tuning_timer import GroupTimer, Preparing
from fusec.scheduling.candidates import candidates

NO_GPU_NOTE = "fusec: note: --autotune needs a CUDA GPU; using the model's schedules"


@dataclass(frozen=True)
class AutotuneOptions:
    """`--autotune-top-k`, `--no-tuning-cache`, and what decides a contest."""

    top_k: int = 4
    cache: bool = True
    contested_ratio: float = 2.0
    contested_intensity: float = 10.0
    timer: GroupTimer | None = None  # None: CUDA events on the GPU present
    device: str = ""  # the device the timer measures (the cache key); "" asks the timer
    quiet: bool = False


@dataclass
class Tuned:
    """One group's (or split part's) candidates and their times."""

    schedules: list[ScheduleAttr | None]
    times: list[float]
    est_us: float = 0.0

    @property
    def best(self) -> int:
        return int(np.argmin(self.times))


@dataclass
class GroupTuning:
    """What autotuning found for one group of the model."""

    group: str
    fused: Tuned
    from_cache: bool
    contest: str = ""
    parts: list[Tuned] = field(default_factory=list[Tuned])
    split: bool = False
    part_names: list[str] = field(default_factory=list[str])

    @property
    def split_us(self) -> float:
        return sum(min(p.times) for p in self.parts)


@dataclass
class TuningResult:
    """The tuning of every group, and the device it was measured on."""

    device: str
    groups: list[GroupTuning]

    @property
    def cached(self) -> int:
        return sum(g.from_cache for g in self.groups)

    @property
    def timed(self) -> int:
        return len(self.groups) - self.cached

    def summary(self) -> str:
        """`N groups from the tuning cache, M timed`."""
        return f"{self.cached} groups from the tuning cache, {self.timed} timed"


def make_timer(options: AutotuneOptions) -> tuple[GroupTimer, str] | None:
    """The options' timer, else CUDA events on the GPU present; None (after
    the note on stderr) without a GPU."""
    if options.timer is not None:
        return options.timer, options.device or "test device"
    from fusec.runtime.device import gpu_available

    if gpu_available():
        try:
            from fusec.runtime.tuning_timer import CudaEventTimer

            timer = CudaEventTimer()
            return timer, timer.device_name()
        except FusecError:
            pass
    print(NO_GPU_NOTE, file=sys.stderr)
    return None


def _groups(module: ModuleOp) -> list[GroupOp]:
    funcs = [f for f in module.ops if isinstance(f, FuncOp) and f.body.blocks
             and not (f.sym_visibility is not None and f.sym_visibility.data == "private")]
    return [g for f in funcs for g in f.body.block.ops if isinstance(g, GroupOp)
            and "gemm" not in g.attributes and not all(0 in tensor_shape(r) for r in g.outputs)]


@dataclass
class _Job:
    """A group to time: its variants (the fused group, then split parts)."""

    index: int
    group: GroupOp
    key: str
    contest: str
    variants: list[tuple[GroupOp, list[ScheduleAttr | None]]]


def autotune(module: ModuleOp, target: Target, limit: int,
             options: AutotuneOptions) -> TuningResult | None:
    """Tune every group of `module` in place (module docstring); None
    without a GPU (nothing changes)."""
    made = make_timer(options)
    if made is None:
        return None
    timer, device = made
    cache = TuningCache.user() if options.cache else None
    groups = _groups(module)
    found: dict[int, GroupTuning] = {}
    jobs: list[_Job] = []
    for index, group in enumerate(groups):
        key = tuning_key(device, target.name, fingerprint(group, options.top_k))
        cached = _from_cache(cache, key, group)
        if cached is not None:
            found[index] = cached
            continue
        c = contest(group, target, options.contested_ratio, options.contested_intensity)
        variants = [(group, _variants(group, target, limit, options.top_k))]
        if c is not None:
            variants += [(p, _variants(p, target, limit, options.top_k))
                         for p in split_parts(group, target, limit)]
        jobs.append(_Job(index, group, key, c.reason if c else "", variants))
    timed = _time_jobs(jobs, target, timer)
    for job, tuned in zip(jobs, timed, strict=True):
        result = GroupTuning(group_name(job.group), tuned[0], False, job.contest, tuned[1:])
        if cache is not None:
            cache.store(job.key, _result_json(result))
        found[job.index] = result
    results = [found[i] for i in range(len(groups))]
    apply(groups, target, limit, results)
    return TuningResult(device, results)


def _variants(group: GroupOp, target: Target, limit: int, k: int) -> list[ScheduleAttr | None]:
    return list(candidates(group, target, limit, k)) or [None]


def _time_jobs(jobs: list[_Job], target: Target, timer: GroupTimer) -> list[list[Tuned]]:
    """Every variant's candidates timed: one tuning module, generated and
    compiled once."""
    if not jobs:
        return []
    from fusec.codegen.generate import generate_program

    funcs: list[FuncOp] = []
    for job in jobs:
        for group, schedules in job.variants:
            for s in schedules:
                funcs.append(trial_function(group, f"t{len(funcs)}", s))
    program = generate_program(ModuleOp(funcs), target)
    if isinstance(timer, Preparing):
        from fusec.codegen.ptx import program_signatures

        timer.prepare(program.kernels_source, program_signatures(program))
    out: list[list[Tuned]] = []
    n = 0
    for job in jobs:
        tuned: list[Tuned] = []
        for _, schedules in job.variants:
            arrays: dict[str, np.ndarray] = {}
            times, est = [], 0.0
            for _ in schedules:
                fp = program.functions[f"t{n}"]
                launch = fp.launches[0]
                _fill_arrays(arrays, fp, n)
                times.append(timer.time_group(program.kernels_source, launch, arrays))
                est = est or launch.est_time_us
                n += 1
            tuned.append(Tuned(list(schedules), times, est))
        out.append(tuned)
    return out


def _fill_arrays(arrays: dict[str, np.ndarray], fp: FunctionProgram, seed: int) -> None:
    """Fresh random inputs, the constants and workspaces, and output buffers
    for every argument of `fp`'s launch not in `arrays` yet."""
    from fusec.runtime.bf16_io import host_bits

    launch = fp.launches[0]
    # A value another candidate sized differently (a split reduction's
    # workspace grows with its splits) is made again at this one's shape.
    missing = {a.value for a in launch.args
               if a.value not in arrays or arrays[a.value].shape != tuple(fp.values[a.value].shape)}
    if not missing:
        return
    rng = np.random.default_rng(seed)
    for v in missing:
        spec = fp.values[v]
        if v in fp.constants:
            arrays[v] = np.ascontiguousarray(fp.constants[v])
        elif v in fp.inputs and spec.dtype == "uint16":  # bf16 bits
            arrays[v] = host_bits(rng.standard_normal(spec.shape).astype(np.float32))
        elif v in fp.inputs and np.dtype(spec.dtype).kind == "f":
            arrays[v] = rng.standard_normal(spec.shape).astype(spec.dtype)
        else:  # integers (indices in range: 0), masks, outputs
            arrays[v] = np.zeros(spec.shape, spec.dtype)


def _result_json(r: GroupTuning) -> dict[str, Any]:
    def tuned(t: Tuned) -> dict[str, Any]:
        return {"candidates": [schedule_json(s) for s in t.schedules], "times_us": t.times,
                "est_us": t.est_us}

    return {"group": r.group, "fused": tuned(r.fused), "contest": r.contest,
            "parts": [tuned(p) for p in r.parts]}


def _from_cache(cache: TuningCache | None, key: str, group: GroupOp) -> GroupTuning | None:
    """The cached tuning of `group`, or None (absent, or unreadable: warned)."""
    if cache is None:
        return None
    data = cache.load(key)
    if data is None:
        return None
    try:
        def tuned(d: Any) -> Tuned:
            times = [float(t) for t in d["times_us"]]
            schedules = [schedule_from_json(s) for s in d["candidates"]]
            if not times or len(times) != len(schedules):
                raise ValueError("no times")
            return Tuned(schedules, times, float(d["est_us"]))

        return GroupTuning(group_name(group), tuned(data["fused"]), True,
                           str(data["contest"]), [tuned(p) for p in data["parts"]])
    except (KeyError, TypeError, ValueError) as err:
        print(f"fusec: warning: ignoring the tuning cache entry '{cache.path(key)}' "
              f"({err}); timing the group again", file=sys.stderr)
        return None


def apply(groups: list[GroupOp], target: Target, limit: int,
          results: list[GroupTuning]) -> None:
    """Give each group its fastest schedule; split the contested groups
    whose parts were faster (a remark gives both times)."""
    remarks = RemarkCollector()
    module = groups[0].get_toplevel_object() if groups else None
    for group, r in zip(groups, results, strict=True):
        fused = min(r.fused.times)
        if r.parts and r.split_us < fused:
            r.split = True
            parts = split_group(group, target, limit)
            if len(parts) != len(r.parts):
                raise FusecError(f"group {r.group}: the tuning cache entry's split has "
                                 f"{len(r.parts)} parts, the group {len(parts)}")
            for part, tuned in zip(parts, r.parts, strict=True):
                _set(part, tuned.schedules[tuned.best])
            r.part_names = [group_name(p) for p in parts]
            remarks.add("remark", f"group {r.group}: split into {len(parts)} kernels by "
                        f"autotuning ({r.contest}): fused {fused:.1f} us, split "
                        f"{r.split_us:.1f} us measured")
        else:
            _set(group, r.fused.schedules[r.fused.best])
            if r.parts:
                remarks.add("remark", f"group {r.group}: kept fused by autotuning "
                            f"({r.contest}): fused {fused:.1f} us, split {r.split_us:.1f} "
                            "us measured")
    if isinstance(module, ModuleOp):
        remarks.store(module)


def _set(group: GroupOp, attr: ScheduleAttr | None) -> None:
    from xdsl.dialects.builtin import StringAttr

    if attr is None or group.attributes.get(SCHEDULE_KEY) == attr:
        return
    group.attributes[SCHEDULE_KEY] = attr
    group.attributes["schedule_text"] = StringAttr(f"autotuned: {attr}")


def annotate_plan(plan: dict[str, Any], program: Program, tuning: TuningResult) -> None:
    """`measured_us` and `tuned_candidates` on each tuned launch of plan.json."""
    measured: dict[str, tuple[float, int]] = {}
    for r in tuning.groups:
        if r.split:
            for name, part in zip(r.part_names, r.parts, strict=True):
                measured[name] = (min(part.times), len(part.times))
        else:
            measured[r.group] = (min(r.fused.times), len(r.fused.times))
    for fname in program.functions:
        for entry in plan["functions"][fname]["launches"]:
            if entry.get("group") in measured and "library" not in entry:
                us, count = measured[entry["group"]]
                entry["measured_us"] = round(us, 3)
                entry["tuned_candidates"] = count


def report_section(tuning: TuningResult) -> str:
    """report.md's "Autotuning" section."""
    lines = ["## Autotuning", "",
             f"Measured on {tuning.device}: {tuning.summary()}.", "",
             "| group | candidates | model's schedule | est. us | measured us | winner "
             "| measured us | from cache |", "|---|---|---|---|---|---|---|---|"]
    for r in tuning.groups:
        t = r.fused
        lines.append(f"| {r.group} | {len(t.times)} | `{schedule_text(t.schedules[0])}` | "
                     f"{t.est_us:.1f} | {t.times[0]:.1f} | `{schedule_text(t.schedules[t.best])}`"
                     f" | {t.times[t.best]:.1f} | {'yes' if r.from_cache else 'no'} |")
    contested = [r for r in tuning.groups if r.parts]
    if contested:
        lines += ["", "Fused against split (contested groups):", ""]
        for r in contested:
            verdict = f"split into {', '.join(r.part_names)}" if r.split else "kept fused"
            lines.append(f"- {r.group} ({r.contest}): fused {min(r.fused.times):.1f} us, "
                         f"split {r.split_us:.1f} us ({len(r.parts)} kernels): {verdict}")
    return "\n".join(lines) + "\n"

