"""Candidate schedules of one group, for the autotuner (`compiler/autotune.py`).

`candidates(group, target, limit, k)` is the model's choice first (the
group's recorded `schedule`, else what `Scheduler.choose` gives), then up to
`k - 1` distinct alternatives that are legal for `target` and within `limit`
bytes of shared memory per block:

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
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable

from fusec.analysis.remarks import RemarkCollector
from fusec.analysis.targets import Target
from fusec.codegen.contraction import analyze as analyze_gemm
from fusec.codegen.decompose_group import decomposed
from fusec.codegen.group_body import GroupBody, compute_type
from fusec.codegen.reduction_plan import analyze as analyze_rows
from fusec.codegen.window_plan import check_plan, plan_attr
from fusec.codegen.window_schedule import group_window, shrink_steps, thread_tiles_below
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import (
    SCHEDULE_KEY,
    AttentionSchedule,
    ContractionSchedule,
    PointwiseSchedule,
    ReductionSchedule,
    ScheduleAttr,
    WindowSchedule,
)
from fusec.dialects.shapes import numel
from fusec.scheduling import reduction
from fusec.scheduling.attention import attention_candidates
from fusec.scheduling.contraction import (
    FALLBACK_TILES,
    choose_tile,
    gemm_shared_bytes,
    tile_attr,
)

POINTWISE_ELEMENTS = (1, 2, 4, 8)
"""Elements per thread a pointwise candidate takes."""
POINTWISE_BLOCKS = (128, 256, 512)
"""Threads per block a pointwise candidate takes."""
REDUCTION_GRID: dict[str, tuple[int | bool, ...]] = {
    "registers": (True, False),
    "register_elems": (8, 16, 32, 64),
    "block_threads": (128, 256, 512),
    "split": (True, False),
    "unroll": (2, 4, 8, 16),  # also the chunk of an online pass's update
    "vector": (4, 1),  # rows by quads where they allow it, or one element per access
}
"""The `ReductionOptions` fields a reduction candidate varies, and their values."""
ATTENTION_CANDIDATES = 12
"""Attention tiles offered at most (the cost model's ranking, legal ones only)."""


def model_choice(group: GroupOp, target: Target, limit: int) -> ScheduleAttr | None:
    """The schedule the model gave `group` (recorded by `tile-and-promote`),
    else the one `Scheduler.choose` gives now; None for a layout copy."""
    attr = group.attributes.get(SCHEDULE_KEY)
    if isinstance(attr, ScheduleAttr):
        return attr
    from fusec.scheduling.choose import Scheduler

    return Scheduler(target, limit, RemarkCollector()).choose(group)[0]


def candidates(group: GroupOp, target: Target, limit: int, k: int) -> list[ScheduleAttr]:
    """The model's choice first, then up to `k - 1` distinct legal
    alternatives within `limit` bytes of shared memory (module docstring)."""
    first = model_choice(group, target, limit)
    if first is None:
        return []
    others: Iterable[ScheduleAttr] = ()
    if isinstance(first, PointwiseSchedule) and first.int_field("tile") == 0:
        # A transposed tile (`tile` > 0) has a fixed 32 x 8 block and no
        # elements-per-thread choice: nothing to vary.
        others = _pointwise(target)
    elif isinstance(first, ReductionSchedule):
        others = _reduction(group, target, limit)
    elif isinstance(first, ContractionSchedule) and first.str_field("impl") == "simt":
        others = _contraction(group, target, limit)
    elif isinstance(first, AttentionSchedule):
        others = attention_candidates(group, target, ATTENTION_CANDIDATES, limit)
    elif isinstance(first, WindowSchedule) and first.str_field("path") not in (
            "conv_pool", "direct"):
        others = _window(group, limit)
    unique = [a for a in dict.fromkeys(others) if a != first]
    if not isinstance(first, AttentionSchedule):  # attention's come in the order to time
        unique.sort(key=lambda a: _distance(first, a))
    return [first, *unique[:max(0, k - 1)]]


def _distance(a: ScheduleAttr, b: ScheduleAttr) -> float:
    """How far `b` is from `a`: log2 steps over integer fields, one per
    differing string field."""
    total = 0.0
    for key in a.field_names():
        x, y = a.get(key), b.get(key)
        if isinstance(x, int) and isinstance(y, int):
            total += abs(math.log2(x + 1) - math.log2(y + 1))
        elif x != y:
            total += 1.0
    return total


def _pointwise(target: Target) -> list[ScheduleAttr]:
    return [PointwiseSchedule.make(elements_per_thread=e, block=b)
            for e in POINTWISE_ELEMENTS for b in POINTWISE_BLOCKS
            if b <= target.max_threads_per_block]


def _reduction(group: GroupOp, target: Target, limit: int) -> list[ScheduleAttr]:
    budget = min(reduction.SHARED_BUDGET_BYTES, limit)
    out: list[ScheduleAttr] = []
    keys = list(REDUCTION_GRID)
    with decomposed(group) as flat:
        ra = analyze_rows(GroupBody.of(flat))
        for values in itertools.product(*REDUCTION_GRID.values()):
            fields = dict(zip(keys, values, strict=True))
            opts = reduction.ReductionOptions(
                registers=bool(fields["registers"]), register_elems=int(fields["register_elems"]),
                block_threads=min(int(fields["block_threads"]), target.max_threads_per_block),
                split=bool(fields["split"]), unroll=int(fields["unroll"]),
                vector=int(fields["vector"]))
            sched = reduction.plan_schedule(ra, reduction.for_target(target, opts, budget))
            if sched.scratch_bytes + sched.cache_bytes <= limit:
                out.append(reduction.to_attr(ra, sched))
    return out


def _contraction(group: GroupOp, target: Target, limit: int) -> list[ScheduleAttr]:
    with decomposed(group) as flat:
        g = analyze_gemm(GroupBody.of(flat))
        item = 8 if compute_type(g.matmul.result) == "float64" else 4
        tiles = [choose_tile(numel(g.batch), g.m, g.n, target), *FALLBACK_TILES]
    return [tile_attr(t) for t in tiles
            if gemm_shared_bytes(t, item) <= limit and t.threads <= target.max_threads_per_block]


def _window(group: GroupOp, limit: int) -> list[ScheduleAttr]:
    start = group_window(group)
    if start is None:
        return []
    plans = [start, *shrink_steps(start), *thread_tiles_below(start)]
    return [plan_attr(t.plan, t.mode) for t in plans
            if t.shared_bytes <= limit and check_plan(t) is None]
