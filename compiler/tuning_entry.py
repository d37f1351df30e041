"""A group's tuning cache entry (`runtime/tuning_cache.py`): what autotuning
writes for a group it timed (`entry_json`), and the check that an entry read
back may be used for a group (`read_entry`).

```json
{"group": "g0", "contest": "",
 "fused": {"candidates": [{"name": "fusion.pointwise", "fields": {...}}, ...],
           "times_us": [0.5, 2.0], "samples_us": [[0.5], [2.0]], "est_us": 0.4},
 "parts": []}
```

An entry is data from outside the compiler: a file anyone may edit, copy
from another group or truncate. The emitters trust the schedule they read,
so a schedule no candidate has can compile into a kernel that gives wrong
numbers or fails, and a bad time can steer the choice. `read_entry` takes
the entry only when every field has the type and range autotuning writes
and every schedule in it is one the scheduler offers that group (or that
split part) now (`scheduling.candidates.offered` and `refusal`, the same
set the candidates timed on a miss come from); else it raises `BadEntry`
with the reason, and the group is timed again.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

from fusec.analysis.targets import Target
from fusec.compiler.tuning_result import GroupTuning, Tuned
from fusec.compiler.tuning_trials import group_name, schedule_from_json, schedule_json, split_parts
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import ScheduleAttr
from fusec.scheduling.candidates import offered, refusal

_ENTRY_KEYS = {"group", "fused", "contest", "parts"}
_TUNED_KEYS = {"candidates", "times_us", "samples_us", "est_us"}


class BadEntry(ValueError):
    """Why a tuning cache entry cannot be used for its group (one line)."""


def entry_json(r: GroupTuning) -> dict[str, Any]:
    """The entry of a timed group: each variant's candidates, times, samples
    and estimate (module docstring)."""
    def tuned(t: Tuned) -> dict[str, Any]:
        return {"candidates": [schedule_json(s) for s in t.schedules], "times_us": t.times,
                "samples_us": t.samples, "est_us": t.est_us}

    return {"group": r.group, "fused": tuned(r.fused), "contest": r.contest,
            "parts": [tuned(p) for p in r.parts]}


def read_entry(data: object, group: GroupOp, target: Target, limit: int,
               margin: float) -> GroupTuning:
    """The tuning of `group` an entry's result `data` holds, its decisions
    made again with `margin`; raises `BadEntry` when any field is not what
    autotuning writes or a schedule is not one the scheduler offers the
    group on `target` within `limit` bytes of shared memory (module
    docstring)."""
    d = _object(data, _ENTRY_KEYS, "the entry")
    if not isinstance(d["group"], str) or not isinstance(d["contest"], str):
        raise BadEntry("group and contest must be strings")
    fused = _tuned(d["fused"], offered(group, target, limit), "fused", margin)
    parts_data = d["parts"]
    if not isinstance(parts_data, list):
        raise BadEntry("parts must be a list")
    parts: list[Tuned] = []
    if parts_data:
        # The split the entry timed must be the split this group gets now:
        # `apply` gives part i the schedule kept for part i.
        groups = split_parts(group, target, limit)
        if len(groups) != len(parts_data):
            raise BadEntry(f"{len(parts_data)} split parts, but the group splits into "
                           f"{len(groups)}")
        parts = [_tuned(p, offered(g, target, limit), f"parts[{i}]", margin)
                 for i, (p, g) in enumerate(zip(parts_data, groups, strict=True))]
    return GroupTuning(group_name(group), fused, True, d["contest"], parts)


def _object(data: object, keys: set[str], what: str) -> dict[str, Any]:
    """`data` as an object with exactly `keys`."""
    if not isinstance(data, dict):
        raise BadEntry(f"{what} is a JSON {_json_type(data)}, not an object")
    d: dict[str, Any] = data
    if set(d) != keys:
        missing, unknown = sorted(keys - set(d)), sorted(set(d) - keys)
        raise BadEntry(f"{what}: missing {missing}, unknown {unknown}")
    return d


def _tuned(data: object, choices: list[ScheduleAttr], where: str, margin: float) -> Tuned:
    """One variant's candidates and times; each candidate is replaced by the
    offered schedule it equals, so what the emitters read is the scheduler's."""
    d = _object(data, _TUNED_KEYS, where)
    cands, times = d["candidates"], times_of(d["times_us"], f"{where}.times_us")
    if not isinstance(cands, list) or not cands or len(cands) != len(times):
        raise BadEntry(f"{where}: candidates must be a list as long as times_us")
    schedules: list[ScheduleAttr | None] = []
    for i, raw in enumerate(cands):
        try:
            attr = schedule_from_json(raw)
        except ValueError as err:
            raise BadEntry(f"{where}.candidates[{i}]: {err}") from None
        why = refusal(attr, choices)
        if why is not None:
            raise BadEntry(f"{where}.candidates[{i}]: {why}")
        schedules.append(_canonical(attr, choices))
    samples_data = d["samples_us"]
    if not isinstance(samples_data, list):
        raise BadEntry(f"{where}.samples_us must be a list")
    samples = [times_of(s, f"{where}.samples_us[{i}]") for i, s in enumerate(samples_data)]
    if samples and (len(samples) != len(times) or not all(samples)):
        raise BadEntry(f"{where}.samples_us must hold samples of every candidate")
    est = _number(d["est_us"], f"{where}.est_us")
    t = Tuned(schedules, times, est, samples)
    t.decide(margin)  # the decision is made again: the margin may differ
    return t


def _canonical(attr: ScheduleAttr | None, choices: list[ScheduleAttr]) -> ScheduleAttr | None:
    """The offered schedule equal to `attr` (which `refusal` let through)."""
    return None if attr is None else choices[choices.index(attr)]


def times_of(data: object, where: str) -> list[float]:
    """`data` as a list of times (`_number`); raises `BadEntry` naming `where`."""
    if not isinstance(data, list):
        raise BadEntry(f"{where} must be a list of numbers")
    return [_number(x, f"{where}[{i}]") for i, x in enumerate(data)]


def _number(x: object, where: str) -> float:
    """A time: a finite number >= 0 (a bool is not one)."""
    value = math.nan
    if isinstance(x, int | float) and not isinstance(x, bool):
        with contextlib.suppress(OverflowError):  # an integer past float's range
            value = float(x)
    if not math.isfinite(value) or value < 0:
        raise BadEntry(f"{where} = {x!r:.40} is not a time in microseconds")
    return value


def _json_type(data: object) -> str:
    names = {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}
    return "null" if data is None else names.get(type(data), type(data).__name__)
