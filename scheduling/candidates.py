"""Candidate schedules of one group, for the autotuner (`compiler/autotune.py`).

`candidates(group, target, limit, k)` is the model's choice first (the
group's recorded `schedule`, else what `Scheduler.choose` gives), then up to
`k - 1` distinct alternatives that are legal for `target` and within `limit`
bytes of shared memory per block, each kind's `candidates`
(`scheduling/kinds/`):

- pointwise: `POINTWISE_ELEMENTS` x `POINTWISE_BLOCKS` (a block no larger
  than the target launches);
- reduction: the schedules `plan_schedule` makes from every combination of
  `REDUCTION_GRID` (row in registers or streamed, register elements per
  lane, threads per block, split on or off (for a column softmax: split
  passes, two kernels), stream unroll (also the chunk of an online
  softmax's update), rows by quads or not), deduplicated by the resulting
  attribute;
- contraction (SIMT): the size-based tile (`choose_tile`) and the fallback
  tiles (`FALLBACK_TILES`) whose shared memory fits;
- window (a lone conv or pool): the plan's shrink steps and smaller thread
  tiles that fit and can be built (`check_plan`);
- attention: the legal tiles in the cost model's order, the fastest of each
  kind first (static or dynamic shared memory, one or two stages:
  `scheduling/attention.candidate_order`), not re-ranked by distance;
- library GEMMs, conv + pool and layout copies: the model's choice
  only (an empty list for a layout copy, which has no schedule).

The cost model prices a group by its bytes and flops, which these schedules
share, so it cannot rank them. The alternatives are ranked by how close they
are to the model's choice (log2 distance over their fields): the model's
neighbours first, as they are the likeliest winners where the model is
nearly right.

`offered` is every schedule the scheduler would give a group (unranked),
and `refusal` says why a schedule from outside the scheduler, such as a
tuning cache entry (`compiler/tuning_entry.py`), is not one of them: the
only check of a schedule's legality is that the scheduler offers it.
"""

from __future__ import annotations

import math

from fusec.analysis.group_kind import group_kind, kind_name
from fusec.analysis.remarks import RemarkCollector
from fusec.analysis.targets import Target
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import SCHEDULE_KEY, AttentionSchedule, ScheduleAttr


def model_choice(group: GroupOp, target: Target, limit: int) -> ScheduleAttr | None:
    """The schedule the model gave `group` (recorded by `tile-and-promote`),
    else the one `Scheduler.choose` gives now; None for a layout copy."""
    attr = group.attributes.get(SCHEDULE_KEY)
    if isinstance(attr, ScheduleAttr):
        return attr
    from fusec.analysis.schedule_choice import Scheduler

    return Scheduler(target, limit, RemarkCollector()).choose(group)[0]


def offered(group: GroupOp, target: Target, limit: int) -> list[ScheduleAttr]:
    """Every schedule the scheduler offers `group`: the model's choice first,
    then each distinct legal alternative of its kind (`GroupKind.candidates`:
    value ranges, divisibility, register and shared-memory budgets and the
    kind's own constraints are how those are made), unranked and untruncated;
    empty for a layout copy."""
    first = model_choice(group, target, limit)
    if first is None:
        return []
    others = group_kind(kind_name(group), group).candidates(group, first, target, limit)
    return [first, *(a for a in dict.fromkeys(others) if a != first)]


def candidates(group: GroupOp, target: Target, limit: int, k: int) -> list[ScheduleAttr]:
    """The model's choice first, then up to `k - 1` distinct legal
    alternatives within `limit` bytes of shared memory (module docstring),
    from the group's kind (`GroupKind.candidates`)."""
    every = offered(group, target, limit)
    if not every:
        return []
    first, unique = every[0], every[1:]
    if not isinstance(first, AttentionSchedule):  # attention's come in the order to time
        unique.sort(key=lambda a: _distance(first, a))
    return [first, *unique[:max(0, k - 1)]]


def refusal(attr: ScheduleAttr | None, choices: list[ScheduleAttr]) -> str | None:
    """Why `attr` (a schedule read from outside, e.g. the tuning cache) is
    not one of `choices`, what `offered` gives its group; None when it is.
    The only legal schedules are the offered ones: the emitters trust the
    schedule they read, and a value no candidate has (one lane per row, an
    online pass the group has no softmax for, a zero or enormous tile) can
    give a kernel that computes wrong numbers or none at all."""
    if attr is None:
        return None if not choices else "no schedule, but the group has one"
    if attr in choices:
        return None
    if not choices:
        return f"a {attr.name} schedule for a group that has none"
    kinds = {c.name for c in choices}
    if attr.name not in kinds:
        return f"a {attr.name} schedule for a group scheduled as {', '.join(sorted(kinds))}"
    near = min((c for c in choices if c.name == attr.name), key=lambda c: _distance(attr, c))
    differs = ", ".join(f"{key} = {attr.get(key)!r}" for key in attr.field_names()
                        if attr.get(key) != near.get(key))
    return (f"{differs} is not among the {len(choices)} schedules the scheduler offers "
            "this group")


def _distance(a: ScheduleAttr, b: ScheduleAttr) -> float:
    """How far `b` is from `a`: log2 steps over integer fields, one per
    differing string field."""
    total = 0.0
    for key in a.field_names():
        x, y = a.get(key), b.get(key)
        if isinstance(x, int) and isinstance(y, int):
            # max(..., 0): a schedule read from outside may hold a negative field
            total += abs(math.log2(max(x, 0) + 1) - math.log2(max(y, 0) + 1))
        elif x != y:
            total += 1.0
    return total
