"""What autotuning measured, in plan.json and report.md (`compiler/autotune.py`).

plan.json: each tuned launch gets `measured_us` (the kept schedule's time),
`model_measured_us` (the model's schedule's), `tuned_candidates` and
`tuning_choice` (`tuned`, `model`, `model: within the noise margin`,
`model: whole call`, `split`); the plan gets an `autotune` object with the
device, the margin, the counts of groups from the cache and timed, the
number of device timings, the whole-call check and `library_choices`: per
library-or-own choice (`compiler/library_tuning.py`) the group, the family
(`conv`, `gemm`), the model's choice, the one kept (`library`, `own`), both
measured and both estimated times, and whether they came from the cache.
"""

from __future__ import annotations

from typing import Any

from fusec.analysis.diagnostics import counted
from fusec.analysis.program import Program
from fusec.compiler.autotune import TuningResult
from fusec.compiler.tuning_result import GroupTuning, Tuned
from fusec.compiler.tuning_trials import schedule_text


def _reverted(tuning: TuningResult) -> bool:
    return tuning.whole_call is not None and tuning.whole_call.kept == "model"


def _choice(t: Tuned, reverted: bool) -> str:
    if reverted and t.best != 0:
        return "model: whole call"
    if t.best != 0:
        return "tuned"
    return "model: within the noise margin" if t.kept_for_noise else "model"


def _measured(r: GroupTuning, reverted: bool) -> dict[str, dict[str, Any]]:
    """plan.json fields by group name, for the groups of the kept program."""
    if r.split and not reverted:
        return {name: {"measured_us": round(p.times[p.best], 3),
                       "tuned_candidates": len(p.times), "tuning_choice": "split"}
                for name, p in zip(r.part_names, r.parts, strict=True)}
    t = r.fused
    kept = 0 if reverted else t.best
    return {r.group: {"measured_us": round(t.times[kept], 3),
                      "model_measured_us": round(t.times[0], 3),
                      "tuned_candidates": len(t.times),
                      "tuning_choice": _choice(t, reverted)}}


def annotate_plan(plan: dict[str, Any], program: Program, tuning: TuningResult,
                  margin: float) -> None:
    """The tuning's fields on each tuned launch of plan.json and its
    `autotune` object (module docstring)."""
    fields: dict[str, dict[str, Any]] = {}
    for r in tuning.groups:
        fields.update(_measured(r, _reverted(tuning)))
    for fname in program.functions:
        for entry in plan["functions"][fname]["launches"]:
            if entry.get("group") in fields and "library" not in entry:
                entry.update(fields[entry["group"]])
    w = tuning.whole_call
    plan["autotune"] = {
        "device": tuning.device, "noise_margin": margin,
        "groups_from_cache": tuning.cached, "groups_timed": tuning.timed,
        "device_timings": tuning.timings,
        "whole_call": None if w is None else {
            "model_us": round(w.model_us, 3), "tuned_us": round(w.tuned_us, 3),
            "kept": w.kept, "from_cache": w.from_cache},
        "whole_call_note": tuning.whole_call_note,
        "library_choices": [c.as_json() for c in tuning.choices],
    }


def _kept_text(t: Tuned, margin: float, reverted: bool) -> str:
    if t.best != 0:
        gain = 100 * (1 - t.times[t.best] / t.times[0]) if t.times[0] else 0.0
        text = f"fastest ({gain:.0f}% faster)"
        return text + ", given up for the whole call" if reverted else text
    if t.kept_for_noise:
        return f"model's (fastest within the {100 * margin:g}% noise margin)"
    return "model's (fastest)"


def _whole_call_line(tuning: TuningResult, margin: float) -> str:
    w = tuning.whole_call
    if w is None:
        return f"Whole call: not checked ({tuning.whole_call_note or 'nothing to check'})."
    source = " (from the tuning cache)" if w.from_cache else ""
    verdict = ("kept the tuned program" if w.kept == "tuned" else
               f"kept the model's program: the tuned one was slower by more than "
               f"{100 * margin:g}%")
    return (f"Whole call{source}: model's program {w.model_us:.1f} us, tuned program "
            f"{w.tuned_us:.1f} us per call: {verdict}.")


def report_section(tuning: TuningResult, margin: float) -> str:
    """report.md's "Autotuning" section."""
    reverted = _reverted(tuning)
    lines = ["## Autotuning", "",
             f"Measured on {tuning.device}: {tuning.summary()}.",
             f"A candidate replaces the model's schedule only when it is more than "
             f"{100 * margin:g}% faster.", "",
             _whole_call_line(tuning, margin), "",
             "| group | candidates | model's schedule | est. us | model's us | fastest "
             "| fastest us | kept | from cache |", "|---|---|---|---|---|---|---|---|---|"]
    for r in tuning.groups:
        t = r.fused
        lines.append(f"| {r.group} | {len(t.times)} | `{schedule_text(t.schedules[0])}` | "
                     f"{t.est_us:.1f} | {t.times[0]:.1f} | "
                     f"`{schedule_text(t.schedules[t.fastest])}` | {t.times[t.fastest]:.1f} | "
                     f"{_kept_text(t, margin, reverted)} | {'yes' if r.from_cache else 'no'} |")
    if tuning.choices:
        lines += ["", "Library call or own kernel (a choice switches only when more than "
                  f"{100 * margin:g}% faster):", "",
                  "| group | family | model's choice | est. library us | est. own us "
                  "| library us | own us | kept | from cache |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for c in tuning.choices:
            lines.append(f"| {c.group} | {c.family} | {c.model} | {c.est_library_us:.1f} | "
                         f"{c.est_own_us:.1f} | {c.library_us:.1f} | {c.own_us:.1f} | "
                         f"{c.kept} | {'yes' if c.from_cache else 'no'} |")
    contested = [r for r in tuning.groups if r.parts]
    if contested:
        lines += ["", "Fused against split (contested groups):", ""]
        for r in contested:
            verdict = f"split into {', '.join(r.part_names)}" if r.split else "kept fused"
            if r.split and reverted:
                verdict += ", given up for the whole call"
            lines.append(f"- {r.group} ({r.contest}): fused {r.fused_us:.1f} us, "
                         f"split {r.split_us:.1f} us ({counted(len(r.parts), 'kernel')}): "
                         f"{verdict}")
    return "\n".join(lines) + "\n"
