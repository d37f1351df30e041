"""The plans of pointwise and layout groups, from their recorded
`#fusion.pointwise` schedule.

- A pointwise group whose operands are all read in place gets its flat plan
  (`scheduling/pointwise_plan.py`, `PointwisePlan`): the collapsed iteration
  shape, each array's access, and the schedule's elements per thread, block
  and half-precision vector width.
- A pointwise group that reads operands through layout ops (transposes,
  slices, reshapes, concats) gets its `TransposedPlan`
  (`scheduling/transposed_plan.py`): the transposed tile or the flat
  schedule with views, and its wide accesses.
- A layout group gets a `LayoutPlan`: its layout ops, the pointwise group it
  is written as (collapsed to the fewest dimensions, `layout_collapse.py`)
  and that group's `TransposedPlan`.

The writers (`codegen/pointwise.py`, `pointwise_transpose.py`, `layout.py`)
read them and decide nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation

from fusec.analysis.targets import Target
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import PointwiseSchedule
from fusec.scheduling.layout_collapse import collapsed, layout_ops
from fusec.scheduling.pointwise_plan import PointwisePlan, plan_group, vector_width
from fusec.scheduling.schedule_input import group_schedule
from fusec.scheduling.transposed_plan import TransposedPlan, has_views, planned_group


@dataclass(frozen=True)
class LayoutPlan:
    """Every decision behind one layout group's kernel."""

    ops: tuple[Operation, ...]
    """The layout op, or the chain of views, the group holds."""
    group: GroupOp
    """The pointwise group it is written as (collapsed where it can be)."""
    transposed: TransposedPlan


def plan_pointwise(group: GroupOp, _body: GroupOp,
                   _target: Target) -> PointwisePlan | TransposedPlan:
    """The plan of pointwise `group` under its recorded schedule."""
    if has_views(group):  # operands read through layout ops: the transposed plan
        return planned_group(group, group_schedule(group, PointwiseSchedule))
    schedule = group_schedule(group, PointwiseSchedule)
    plan = plan_group(group)
    plan.unroll = schedule.int_field("elements_per_thread")
    plan.threads = schedule.int_field("block")
    plan.vector = vector_width(plan)
    return plan


def plan_layout(group: GroupOp, _body: GroupOp, _target: Target) -> LayoutPlan:
    """The plan of layout `group` under its recorded schedule."""
    ops = tuple(layout_ops(group))
    flat = collapsed(group)
    return LayoutPlan(ops, flat, planned_group(flat, group_schedule(flat, PointwiseSchedule)))
