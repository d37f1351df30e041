"""Which pointwise groups run as one launch (`split_launches`): the kernels
that read slices of one tensor (`codegen/split_launch.py` writes them).

The groups: pointwise groups on the flat schedule (no
shared-memory tile, no concat segments) with the same block size that read
one value through `nn.slice` (the first such value of each group decides),
taken in program order; a group joins the launch of the first one only when
every value it reads is defined before that first group (the launch runs
there; constants are held by the program from the start), so none reads
another's result.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import BlockArgument, Operation, SSAValue

from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import PointwiseSchedule
from fusec.dialects.shapes import numel
from fusec.scheduling.schedule_input import group_schedule
from fusec.scheduling.transposed_plan import TransposedPlan, has_views, planned_group


def _flat_plan(group: GroupOp) -> TransposedPlan | None:
    """The plan of a pointwise group on the flat schedule that reads views,
    else None."""
    kind = group.attributes.get("kind")
    if getattr(kind, "data", None) != "pointwise" or not has_views(group):
        return None
    if not isinstance(group.attributes.get("schedule"), PointwiseSchedule):
        return None
    plan = planned_group(group, group_schedule(group, PointwiseSchedule))
    if plan.axes is not None or not numel(plan.shape):
        return None
    if plan.concat is not None or plan.staged is not None:
        return None
    return plan


def _sliced_source(group: GroupOp) -> SSAValue | None:
    """The first value `group` reads only through `nn.slice`s, else None."""
    for value, arg in zip(group.inputs, group.block.args, strict=True):
        uses = [u.operation for u in arg.uses]
        if uses and all(isinstance(u, nn.SliceOp) for u in uses):
            return value
    return None


def split_launches(ops: Sequence[Operation]) -> list[list[GroupOp]]:
    """The sets of two or more groups among `ops` (a function body, in
    order) that run as one launch, each in program order (module docstring)."""
    position = {op: i for i, op in enumerate(ops)}
    candidates: dict[tuple[SSAValue, int], list[GroupOp]] = {}
    for op in ops:
        if isinstance(op, GroupOp) and (plan := _flat_plan(op)) is not None and (
                source := _sliced_source(op)) is not None:
            candidates.setdefault((source, plan.threads), []).append(op)

    def defined_before(v: SSAValue, first: int) -> bool:
        # constants are program constants, on the device before any launch
        return isinstance(v, BlockArgument) or isinstance(v.owner, nn.ConstantOp) or (
            position.get(v.owner, first) < first)

    out: list[list[GroupOp]] = []
    for members in candidates.values():
        first = position[members[0]]
        kept = [g for g in members if all(defined_before(v, first) for v in g.inputs)]
        if len(kept) >= 2:
            out.append(kept)
    return out
