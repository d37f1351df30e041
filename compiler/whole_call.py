"""The autotuner's last check: is the tuned program faster as a whole call?

Each group's schedule was chosen on its own kernel; as a whole call, the
kernels interact (one's output is the next one's input, still in L2 or not,
launches overlap their tails), so the choices need not add up. After tuning
(`compiler/autotune.py`) the tuned program and the model's (the module as
the pipeline left it, before tuning, generated once more only here) are
timed as whole calls (`CallTiming.time_calls`: their executors, the same
fresh random inputs at the real shapes, CUDA events around batches of
calls, interleaved). The tuned program is kept unless it is slower than the
model's by more than the noise margin (`compiler/tuning_decision.py`);
report.md and plan.json give both times and which was kept.

The times are kept in the tuning cache under the device, the target and a
fingerprint of the model's program and of what tuning changed in it, so a
second compile of the same model times nothing. Nothing is timed when
tuning changed nothing, or without a GPU (autotuning is skipped, with its
note).
"""

from __future__ import annotations

import statistics
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from fusec.analysis.program import Program
from fusec.analysis.targets import Target
from fusec.compiler.autotune import AutotuneOptions, TuningResult, WholeCall
from fusec.compiler.tuning_decision import slower_beyond
from fusec.compiler.tuning_entry import BadEntry, times_of
from fusec.compiler.tuning_trials import TIMING_METHOD, schedule_text
from fusec.runtime.progress import progress_bar
from fusec.runtime.tuning_cache import TuningCache, tuning_key
from fusec.runtime.tuning_timer import CallTiming
from fusec.version import __version__


def fingerprint(model_module: ModuleOp, tuning: TuningResult) -> str:
    """The model's program (printed) and each group's kept schedule and
    split: what the tuned program is made of."""
    from fusec.compiler.driver import module_to_text

    lines = [f"fusec {__version__}; {TIMING_METHOD}; whole call",
             module_to_text(model_module)]
    for r in tuning.groups:
        parts = [schedule_text(p.schedules[p.best]) for p in r.parts] if r.split else []
        lines.append(f"{r.group}: {schedule_text(r.fused.schedules[r.fused.best])} "
                     f"split={r.split} {parts}")
    return "\n".join(lines)


def settle(tuning: TuningResult, tuned: tuple[ModuleOp, Program], model_module: ModuleOp,
           target: Target, options: AutotuneOptions) -> tuple[ModuleOp, Program]:
    """The module and program to keep: the tuned ones, unless the model's
    are faster as a whole call (module docstring); `tuning` records it."""
    timer = tuning.timer
    if not tuning.changed:
        tuning.whole_call_note = "tuning kept the model's program"
        return tuned
    if not isinstance(timer, CallTiming):
        tuning.whole_call_note = "the timer cannot time whole calls"
        return tuned
    from fusec.codegen.generate import generate_program

    cache = options.tuning_cache()
    key = tuning_key(tuning.device, target.name, fingerprint(model_module, tuning))
    samples = _from_cache(cache, key)
    model_program = None
    if samples is None:
        model_program = generate_program(model_module, target)
        with progress_bar(0 if options.quiet else 1, "timing whole calls") as bar:
            samples = timer.time_calls([model_program, tuned[1]])
            bar.advance("the model's program and the tuned one")
        if cache is not None:
            cache.store(key, {"model_samples_us": samples[0], "tuned_samples_us": samples[1]})
        from_cache = False
    else:
        from_cache = True
    model_s, tuned_s = samples
    kept = "model" if slower_beyond(model_s, tuned_s, options.noise_margin) else "tuned"
    tuning.whole_call = WholeCall(float(statistics.median(model_s)),
                                  float(statistics.median(tuned_s)), kept, from_cache)
    if kept == "tuned":
        return tuned
    return model_module, model_program or generate_program(model_module, target)


def _from_cache(cache: TuningCache | None, key: str) -> list[list[float]] | None:
    """The cached samples (model's, tuned), or None (absent, or unusable: warned)."""
    data: Any = cache.load(key) if cache is not None else None
    if cache is None or data is None:
        return None
    try:
        samples = [times_of(data.get(k), k) for k in ("model_samples_us", "tuned_samples_us")]
        if not all(samples):
            raise BadEntry("no samples")
        return samples
    except BadEntry as err:
        cache.warn_ignored(key, str(err), "timing the whole call again")
        return None
