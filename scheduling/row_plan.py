"""The plan of a reduction group (`RowPlan`): every decision the reduction
writer (`codegen/reduction.py`) reads, made once from the group and its
recorded `#fusion.reduction` schedule.

- `rows`: the row analysis (`scheduling/reduction_plan.py`): the shape, the
  reduced axes, each value's frame, stage and variation;
- `schedule`: the recorded schedule applied to those rows
  (`reduction_schedule.from_attr`: lanes, rows per block, cached values,
  registers, splits, vector width);
- `index`: the collapsed index plan of the rows (`scheduling/row_index.py`);
- `online`: the softmax (max, sum) that share pass 1, when the schedule
  asks for it (`scheduling/online_pair.py`);
- `two_kernels`: whether the split rows run as two kernels (partials, then
  the rest);
- `roots`: per pass (1 .. stages + 1), what it evaluates per element.

A schedule the group cannot run (a vector width its rows do not take, an
online pass without a softmax, a split of a group with several passes) is a
located error here, before any text is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue

from fusec.analysis.diagnostics import op_error
from fusec.analysis.targets import Target
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import ReductionSchedule
from fusec.scheduling.online_pair import online_pair
from fusec.scheduling.reduction_plan import RowAnalysis, analyze_group
from fusec.scheduling.reduction_schedule import RowSchedule, from_attr, pass_roots, split_passes
from fusec.scheduling.row_index import RowIndexPlan, plan_index
from fusec.scheduling.row_vector import vector_width
from fusec.scheduling.schedule_input import group_schedule


@dataclass(frozen=True)
class RowPlan:
    """Every decision behind one reduction group's kernel(s)."""

    rows: RowAnalysis
    schedule: RowSchedule
    index: RowIndexPlan
    online: tuple[nn.ReduceMaxOp, nn.ReduceSumOp] | None
    two_kernels: bool
    roots: tuple[tuple[SSAValue, ...], ...]
    """`roots[s - 1]`: what pass `s` evaluates per element (s = 1 .. stages + 1)."""

    def pass_roots(self, stage: int) -> tuple[SSAValue, ...]:
        """What pass `stage` evaluates per element (`reduction_schedule.pass_roots`)."""
        return self.roots[stage - 1]


def plan_rows(group: GroupOp, body: GroupOp, _target: Target) -> RowPlan:
    """The plan of reduction `group`, whose (decomposed) body is `body`, under
    its recorded schedule."""
    ra = analyze_group(body)
    sched = from_attr(ra, group_schedule(group, ReductionSchedule))
    _check_vector(ra, sched)
    online = online_pair(ra) if sched.online else None
    if sched.online and online is None:
        raise op_error(ra.body.group, "the schedule asks for online softmax statistics "
                       "(online = 1), but the group has no max and sum of exps to share a pass")
    two_kernels = split_passes(ra, sched)
    if two_kernels and ((ra.stages != 1 and online is None) or sched.cached or sched.registers):
        raise op_error(ra.body.group, f"the schedule splits the rows over {sched.splits} "
                       "blocks, but this group has more than one pass of statistics (or a "
                       "row cache): only one pass (or an online softmax) splits")
    roots = tuple(tuple(pass_roots(ra, s)) for s in range(1, ra.stages + 2))
    return RowPlan(ra, sched, plan_index(ra), online, two_kernels, roots)


def _check_vector(ra: RowAnalysis, sched: RowSchedule) -> None:
    """A schedule's `vector` must fit the group and tile its rows in quads."""
    if sched.vector == 1:
        return
    width = sched.lanes * sched.vector
    whole = (sched.per_lane % sched.vector == 0 if sched.registers
             else sched.splits == 1 or sched.chunk % width == 0)
    if sched.column or sched.vector != vector_width(ra) or not whole:
        raise op_error(ra.body.group, f"the schedule asks for vector = {sched.vector}, but this "
                       "group's rows cannot be read in quads (a row layout, one contiguous row "
                       "axis of a length that is a multiple of 4, f32/f16/bf16 row operands; "
                       "per_lane a multiple of 4, split chunks whole steps of 4 x lanes)")
