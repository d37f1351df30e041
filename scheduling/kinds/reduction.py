"""The reduction kind: reductions sharing one iteration space with the
elementwise ops around them; a row, column or split schedule
(`scheduling/reduction_schedule.py`)."""

from __future__ import annotations

import itertools

from xdsl.ir import SSAValue

from fusec.analysis.decompose_group import decomposed
from fusec.analysis.fusion_legality import (
    Candidate,
    GroupInfo,
    Merged,
    describe_group,
    indexed_read,
    merge_reduction,
)
from fusec.analysis.group_kind import Choice, ScheduleContext
from fusec.analysis.scheduled_cost import ScheduledKernel
from fusec.analysis.targets import Target
from fusec.analysis.view_operands import FOLDED_VIEWS
from fusec.dialects.fusion import GroupOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.schedule import ReductionSchedule, ScheduleAttr
from fusec.scheduling import reduction_schedule as reduction
from fusec.scheduling.contraction_schedule import GemmTile
from fusec.scheduling.kinds.common import body_ops, group_name
from fusec.scheduling.kinds.over_budget import SplitOverBudget
from fusec.scheduling.kinds.summary import SummaryResources
from fusec.scheduling.reduction_plan import analyze_group as analyze_rows
from fusec.scheduling.register_estimate import RegisterEstimate
from fusec.scheduling.register_model import reduction_estimate
from fusec.scheduling.schedule_cost import reduction_kernel

BASE_REGISTERS = 24
"""Legality's base registers of a reduction thread (index math, partials)."""
SHARED_BYTES = 32 * 4
"""Legality's shared bytes per reduction: the cross-warp partials of a
block-per-row reduction (one f32 per warp of a 1024-thread block)."""
REDUCTION_GRID: dict[str, tuple[int | bool, ...]] = {
    "registers": (True, False),
    "register_elems": (8, 16, 32, 64),
    "block_threads": (128, 256, 512),
    "split": (True, False),
    "unroll": (2, 4, 8, 16),  # also the chunk of an online pass's update
    "vector": (4, 1),  # rows by quads where they allow it, or one element per access
}
"""The `ReductionOptions` fields a reduction candidate varies, and their values."""


class ReductionKind(SplitOverBudget, SummaryResources):
    """`kind = "reduction"`."""

    name = "reduction"
    base_registers = BASE_REGISTERS
    shared_bytes = SHARED_BYTES
    shared_per_part = True  # each merged reduction keeps its scratch

    def merge(self, c: Candidate, mine: GroupInfo, other: GroupInfo) -> Merged | str | None:
        """A concat or gather read in place first; then a pointwise group
        or a reduction of the same iteration space, or a transpose, slice or
        reshape (or a chain of them) read in place (`analysis/reduction_views.py`,
        checked with the merged group by `fuse_infos`)."""
        if (indexed := indexed_read(c)) is not None:
            return indexed
        if other.kind in ("pointwise", "reduction"):
            return merge_reduction(c)
        if other.kind == "view" and c.options.fold_views and all(
                isinstance(op, FOLDED_VIEWS) for op in other.ops):
            if not c.edges(other, mine) or c.edges(mine, other):
                return (f"{describe_group(c.dep, other)} reads the result of "
                        f"{describe_group(c.dep, mine)}; a reduction kernel reads a layout "
                        "op in place only over operands it reads from memory")
            return merge_reduction(c)
        return None

    def kernel_path(self, info: GroupInfo) -> str:
        """Always the reduction kernel."""
        return "reduction"

    def choose(self, ctx: ScheduleContext, group: GroupOp) -> Choice:
        """`reduction.plan_schedule` for the target, its shared-memory cache
        within the target's static shared memory (or the limit when smaller)."""
        budget = min(ctx.target.static_shared_limit, ctx.limit)
        with decomposed(group) as flat:
            ra = analyze_rows(flat)
            sched = reduction.plan_schedule(
                ra, reduction.for_target(ctx.target, shared_limit=budget))
            attr = reduction.to_attr(ra, sched)
        split = (f", each row split over {sched.splits} blocks (the last to arrive combines "
                 "their partials)") if sched.splits > 1 else ""
        if reduction.split_passes(ra, sched):
            split = (f", each column split over {sched.splits} blocks in two kernels (partial "
                     "statistics, then their combination and the outputs)")
        if sched.online:
            split += ", softmax max and sum of exps in one pass (online)"
        used = sched.scratch_bytes + sched.cache_bytes
        if sched.column:
            return attr, (f"reduction: column schedule, {sched.rows_per_block} columns x "
                          f"{sched.lanes} lanes per block, partials transposed in shared "
                          "memory" + split), used
        if sched.registers:
            return attr, (f"reduction: row in registers, {sched.per_lane} elements per lane, "
                          f"{sched.lanes} lanes per row"), sched.scratch_bytes
        on_chip = attr.str_field("row") == "shared"
        if not on_chip:
            ctx.remarks.add("remark", f"group {group_name(group)}: rows of {ra.row_length} "
                            f"elements do not fit {budget} bytes of shared memory; staged "
                            "(later passes re-read the row from memory)")
        where = "kept on chip" if on_chip else "staged through memory"
        return attr, (f"reduction: {sched.lanes} lanes per row, {sched.rows_per_block} rows per "
                      f"block, row {where}" + split), used

    def priced_by_schedule(self, info: GroupInfo) -> bool:
        """Yes: split rows, two kernels for a split column, rows re-read from memory."""
        return True

    def scheduled_kernel(self, ctx: ScheduleContext, group: GroupOp,
                         attr: ScheduleAttr | None) -> ScheduledKernel:
        """The row schedule's grid, kernels and re-read bytes (`schedule_cost`)."""
        assert isinstance(attr, ReductionSchedule)
        return reduction_kernel(group, attr, ctx.target.max_resident_threads)

    def candidates(self, group: GroupOp, first: ScheduleAttr, target: Target,
                   limit: int) -> list[ScheduleAttr]:
        """The schedules `plan_schedule` makes from every combination of
        `REDUCTION_GRID` whose shared memory fits `limit`."""
        budget = min(target.static_shared_limit, limit)
        out: list[ScheduleAttr] = []
        keys = list(REDUCTION_GRID)
        with decomposed(group) as flat:
            ra = analyze_rows(flat)
            for values in itertools.product(*REDUCTION_GRID.values()):
                fields = dict(zip(keys, values, strict=True))
                opts = reduction.ReductionOptions(
                    registers=bool(fields["registers"]),
                    register_elems=int(fields["register_elems"]),
                    block_threads=min(int(fields["block_threads"]),
                                      target.max_threads_per_block),
                    split=bool(fields["split"]), unroll=int(fields["unroll"]),
                    vector=int(fields["vector"]))
                sched = reduction.plan_schedule(ra, reduction.for_target(target, opts, budget))
                if sched.scratch_bytes + sched.cache_bytes <= limit:
                    out.append(reduction.to_attr(ra, sched))
        return out

    def registers(self, group: GroupOp, target: Target,
                  tile: GemmTile | None = None) -> RegisterEstimate:
        """`register_model.reduction_estimate`."""
        return reduction_estimate(group, target)

    def may_cross_split(self, group: GroupOp, cross: list[SSAValue]) -> bool:
        """Only full-row values: those of the group's full shape (the
        shape of its widest result), never a reduced one."""
        ops = body_ops(group)
        full = max((tensor_shape(r) for op in ops for r in op.results), key=len, default=())
        return all(tensor_shape(v) == full for v in cross)
