"""Autotuning (`fusec MODEL -o OUT --autotune`, `fusec.compile(..., autotune=True)`).

After the pipeline, for each group (library GEMMs aside):

1. its candidate schedules (`scheduling/candidates.py`: the model's choice
   and up to top-k - 1 alternatives) each become a trial function of one
   tuning module (`compiler/tuning_trials.py`), generated once and compiled
   in parallel;
2. each trial is timed on the device at the real shapes with fresh random
   inputs (`runtime/tuning_timer.py`: warm-up, calibrated batches between
   CUDA events, the candidates of a group interleaved, inputs rotated past
   the L2); a candidate replaces the model's schedule only when it is faster
   by more than the noise margin (`compiler/tuning_decision.py`), else the
   model's is kept and the report says it was kept for noise;
3. a *contested* fused group, one of several ops whose estimate is within
   `contested_ratio` of its split parts' either way or whose arithmetic
   intensity is above `contested_intensity` FLOP/B, is also timed split (the
   same ops as separate groups, as `group-each-op` makes them, each with its
   best schedule); when the split parts' sum is faster by more than the
   margin, the group is split in the output, with a remark giving both
   times. Single-op groups, attention groups and library GEMMs are never
   contested;
4. the result per group is kept in the tuning cache (`runtime/tuning_cache.py`),
   keyed by device, target and the group's fingerprint, so a later compile
   of the same group times nothing;
5. the tuned program is checked as a whole call against the model's
   (`compiler/whole_call.py`), and given up when it is slower.

Before all this, while the pipeline runs, the library-or-own choices the
cost model makes (cuDNN or cuBLAS against fusec's own kernel) are timed
where they are made (`compiler/library_tuning.py`); their results join the
`TuningResult` (`choices`).

The results go to plan.json and to report.md's "Autotuning" section
(`compiler/tuning_report.py`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp

from fusec.analysis.diagnostics import FusecError, counted
from fusec.analysis.group_kind import BACKEND_ATTR, LIBRARY_BACKEND
from fusec.analysis.program import FunctionProgram
from fusec.analysis.remarks import RemarkCollector
from fusec.analysis.targets import Target
from fusec.compiler.library_tuning import ChoiceTuning
from fusec.compiler.tuning_decision import NOISE_MARGIN
from fusec.compiler.tuning_entry import BadEntry, entry_json, read_entry
from fusec.compiler.tuning_result import GroupTuning, Tuned
from fusec.compiler.tuning_trials import (
    contest,
    fingerprint,
    group_name,
    split_group,
    split_parts,
    trial_function,
)
from fusec.dialects.fusion import GroupOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.schedule import SCHEDULE_KEY, ScheduleAttr
from fusec.runtime.progress import progress_bar
from fusec.runtime.tuning_cache import TuningCache, tuning_key
from fusec.runtime.tuning_timer import GroupTimer, Interleaving, Preparing
from fusec.scheduling.candidates import candidates

NO_GPU_NOTE = "fusec: note: --autotune needs a CUDA GPU; using the model's schedules"


@dataclass(frozen=True)
class AutotuneOptions:
    """`--autotune-top-k`, `--no-tuning-cache`, what decides a contest, and
    the margin a measured alternative must beat the model's choice by."""

    top_k: int = 4
    cache: bool = True
    contested_ratio: float = 2.0
    contested_intensity: float = 10.0
    noise_margin: float = NOISE_MARGIN
    timer: GroupTimer | None = None  # None: CUDA events on the GPU present
    device: str = ""  # the device the timer measures (the cache key); "" asks the timer
    quiet: bool = False
    cache_dir: Path | None = None  # None: the per-user tuning cache (`TuningCache.user`)

    def tuning_cache(self) -> TuningCache | None:
        """The tuning cache to read and write; None with `cache` off."""
        if not self.cache:
            return None
        return TuningCache(self.cache_dir) if self.cache_dir else TuningCache.user()


@dataclass
class WholeCall:
    """The whole-call check (`compiler/whole_call.py`): both programs' times
    per call, which was kept, and whether it came from the tuning cache."""

    model_us: float
    tuned_us: float
    kept: str  # "tuned" or "model"
    from_cache: bool


@dataclass
class TuningResult:
    """The tuning of every group, the device it was measured on, and the
    whole-call check."""

    device: str
    groups: list[GroupTuning]
    timer: GroupTimer | None = None
    whole_call: WholeCall | None = None
    whole_call_note: str = ""  # why there is no whole-call check
    # library against own, per choice the cost model made (`compiler/library_tuning.py`)
    choices: list[ChoiceTuning] = field(default_factory=list[ChoiceTuning])

    @property
    def cached(self) -> int:
        return sum(g.from_cache for g in self.groups)

    @property
    def timed(self) -> int:
        return len(self.groups) - self.cached

    @property
    def changed(self) -> bool:
        """Whether the tuned program differs from the model's."""
        return any(g.changed for g in self.groups)

    @property
    def timings(self) -> int:
        """Device timings this compile ran: groups, and the whole call."""
        whole = self.whole_call is not None and not self.whole_call.from_cache
        return self.timed + int(whole) + sum(not c.from_cache for c in self.choices)

    def summary(self) -> str:
        """`N groups from the tuning cache, M timed; whole call: ...; K timings ...`."""
        w = self.whole_call
        if w is None:
            whole = self.whole_call_note or "not checked"
        else:
            kept = "the tuned program" if w.kept == "tuned" else "the model's program"
            whole = (f"{kept} kept (model's {w.model_us:.1f} us, tuned {w.tuned_us:.1f} us"
                     f"{', from the tuning cache' if w.from_cache else ''})")
        choices = ""
        if self.choices:
            cached = sum(c.from_cache for c in self.choices)
            choices = (f"library or own: {counted(len(self.choices), 'choice')}, {cached} "
                       f"from the tuning cache, {len(self.choices) - cached} timed; ")
        return (f"{counted(self.cached, 'group')} from the tuning cache, {self.timed} timed; "
                f"{choices}whole call: {whole}; {counted(self.timings, 'timing')} on the device")


def make_timer(options: AutotuneOptions, target: Target) -> tuple[GroupTimer, str] | None:
    """The options' timer, else CUDA events on the GPU present (inputs
    rotated past `target`'s L2); None (after the note on stderr) without a GPU."""
    if options.timer is not None:
        return options.timer, options.device or "test device"
    from fusec.runtime.device import gpu_available

    if gpu_available():
        try:
            from fusec.runtime.tuning_timer import CudaEventTimer

            timer = CudaEventTimer(l2_bytes=target.l2_bytes)
            return timer, timer.device_name()
        except FusecError:
            pass
    print(NO_GPU_NOTE, file=sys.stderr)
    return None


def _groups(module: ModuleOp) -> list[GroupOp]:
    funcs = [f for f in module.ops if isinstance(f, FuncOp) and f.body.blocks
             and not (f.sym_visibility is not None and f.sym_visibility.data == "private")]
    # Library calls (cuBLAS GEMMs, cuDNN convolutions) have no schedule to time.
    return [g for f in funcs for g in f.body.block.ops if isinstance(g, GroupOp)
            and "gemm" not in g.attributes and not _library(g)
            and not all(0 in tensor_shape(r) for r in g.outputs)]


def _library(group: GroupOp) -> bool:
    backend = group.attributes.get(BACKEND_ATTR)
    return isinstance(backend, StringAttr) and backend.data == LIBRARY_BACKEND


@dataclass
class _Job:
    """A group to time: its variants (the fused group, then split parts)."""

    index: int
    group: GroupOp
    key: str
    contest: str
    variants: list[tuple[GroupOp, list[ScheduleAttr | None]]]


_ASK = object()  # `autotune`'s `made` not given: make the timer


def autotune(module: ModuleOp, target: Target, limit: int, options: AutotuneOptions,
             made: tuple[GroupTimer, str] | object | None = _ASK) -> TuningResult | None:
    """Tune every group of `module` in place (module docstring); None
    without a GPU (nothing changes). `made` is `make_timer`'s answer when
    the caller asked it already."""
    if made is _ASK:
        made = make_timer(options, target)
    if not isinstance(made, tuple):
        return None
    timer, device = made
    cache = options.tuning_cache()
    groups = _groups(module)
    found: dict[int, GroupTuning] = {}
    jobs: list[_Job] = []
    for index, group in enumerate(groups):
        key = tuning_key(device, target.name, fingerprint(group, options.top_k))
        cached = _from_cache(cache, key, group, target, limit, options.noise_margin)
        if cached is not None:
            found[index] = cached
            continue
        c = contest(group, target, options.contested_ratio, options.contested_intensity)
        variants = [(group, _variants(group, target, limit, options.top_k))]
        if c is not None:
            variants += [(p, _variants(p, target, limit, options.top_k))
                         for p in split_parts(group, target, limit)]
        jobs.append(_Job(index, group, key, c.reason if c else "", variants))
    timed = _time_jobs(jobs, target, timer, options.quiet)
    for job, tuned in zip(jobs, timed, strict=True):
        for t in tuned:
            t.decide(options.noise_margin)
        result = GroupTuning(group_name(job.group), tuned[0], False, job.contest, tuned[1:])
        if cache is not None:
            cache.store(job.key, entry_json(result))
        found[job.index] = result
    results = [found[i] for i in range(len(groups))]
    apply(groups, target, limit, results, options.noise_margin)
    return TuningResult(device, results, timer)


def _variants(group: GroupOp, target: Target, limit: int, k: int) -> list[ScheduleAttr | None]:
    return list(candidates(group, target, limit, k)) or [None]


def _time_jobs(jobs: list[_Job], target: Target, timer: GroupTimer,
               quiet: bool = False) -> list[list[Tuned]]:
    """Every variant's candidates timed (interleaved where the timer can):
    one tuning module, generated and compiled once."""
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
    with progress_bar(0 if quiet else len(jobs), "timing groups") as bar:
        for job in jobs:
            tuned: list[Tuned] = []
            for _, schedules in job.variants:
                fps = [program.functions[f"t{i}"] for i in range(n, n + len(schedules))]
                tuned.append(_time_variant(timer, program.kernels_source, fps, n, schedules))
                n += len(schedules)
            out.append(tuned)
            bar.advance(group_name(job.group))
    return out


def _time_variant(timer: GroupTimer, source: str, fps: list[FunctionProgram], seed: int,
                  schedules: list[ScheduleAttr | None]) -> Tuned:
    """The candidates of one variant, on the same fresh random inputs (each
    with its own workspaces and outputs), interleaved where the timer can."""
    shared: dict[str, np.ndarray] = {}
    arrays: list[dict[str, np.ndarray]] = []
    for i, fp in enumerate(fps):
        own = dict(shared)
        _fill_arrays(own, fp, seed + i)
        for value, array in own.items():
            shared.setdefault(value, array)
        arrays.append(own)
    # A candidate may be two launches (a reduction's split passes): each is
    # timed, and a candidate's sample is the sum of its launches' samples.
    launches = [la for fp in fps for la in fp.launches]
    owners = [a for fp, a in zip(fps, arrays, strict=True) for _ in fp.launches]
    if isinstance(timer, Interleaving):
        flat = timer.time_candidates(source, launches, owners)
    else:
        flat = [[timer.time_group(source, la, a)] for la, a in zip(launches, owners,
                                                                   strict=True)]
    samples: list[list[float]] = []
    for fp in fps:
        mine, flat = flat[:len(fp.launches)], flat[len(fp.launches):]
        samples.append([sum(col) for col in zip(*mine, strict=False)])
    times = [float(np.median(s)) for s in samples]
    est = next((la.est_time_us for la in launches if la.est_time_us), 0.0)
    return Tuned(list(schedules), times, est, [list(s) for s in samples])


def _fill_arrays(arrays: dict[str, np.ndarray], fp: FunctionProgram, seed: int) -> None:
    """Fresh random inputs (`call_timer.random_input`: an integer input
    that indexes a gather drawn below its table, `fp.index_bounds`, so a
    gather is timed on scattered reads, not on index 0 again and again, a
    cache-hot read that no real input gives), the constants and workspaces,
    and output buffers for every argument of `fp`'s launches not in
    `arrays` yet."""
    from fusec.runtime.call_timer import random_input

    args = [a for la in fp.launches for a in la.args]
    # A value another candidate sized differently (a split reduction's
    # workspace grows with its splits) is made again at this one's shape.
    missing = {a.value for a in args
               if a.value not in arrays or arrays[a.value].shape != tuple(fp.values[a.value].shape)}
    if not missing:
        return
    rng = np.random.default_rng(seed)
    for v in missing:
        spec = fp.values[v]
        if v in fp.constants:
            arrays[v] = np.ascontiguousarray(fp.constants[v])
        elif v in fp.inputs:
            arrays[v] = random_input(rng, spec, fp.index_bounds.get(v))
        else:  # outputs and workspaces
            arrays[v] = np.zeros(spec.shape, spec.dtype)


def _from_cache(cache: TuningCache | None, key: str, group: GroupOp, target: Target,
                limit: int, margin: float) -> GroupTuning | None:
    """The cached tuning of `group`, or None: absent, or not usable (unreadable,
    or not what autotuning writes for this group: `compiler/tuning_entry.py`;
    warned, and the group is timed again and its entry replaced)."""
    if cache is None:
        return None
    data = cache.load(key)
    if data is None:
        return None
    try:
        return read_entry(data, group, target, limit, margin)
    except BadEntry as err:
        cache.warn_ignored(key, str(err), "timing the group again")
        return None


def apply(groups: list[GroupOp], target: Target, limit: int,
          results: list[GroupTuning], margin: float = NOISE_MARGIN) -> None:
    """Give each group its kept schedule; split the contested groups whose
    parts were faster by more than `margin` (a remark gives both times)."""
    remarks = RemarkCollector()
    module = groups[0].get_toplevel_object() if groups else None
    for group, r in zip(groups, results, strict=True):
        fused = r.fused_us
        if r.parts and r.split_us < fused * (1 - margin):
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
