"""The pointwise kind: elementwise and broadcast ops over one iteration
space, flat (elements per thread, block) or, when a transpose in the group
moves the innermost axis, a tile that stages the transposed operands
through shared memory."""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from fusec.analysis.fusion_legality import (
    Candidate,
    GroupInfo,
    Merged,
    indexed_read,
    merge_pointwise,
    view_operand,
)
from fusec.analysis.group_kind import Choice, ScheduleContext
from fusec.analysis.pointwise_registers import pointwise_registers_of
from fusec.analysis.scheduled_cost import ScheduledKernel
from fusec.analysis.targets import Target
from fusec.analysis.transposed_operands import tile_axes, tile_bytes
from fusec.analysis.view_operands import FOLDED_VIEWS
from fusec.dialects.fusion import GroupOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.schedule import PointwiseSchedule, ScheduleAttr
from fusec.dialects.shapes import broadcast_shapes
from fusec.scheduling.contraction_schedule import GemmTile
from fusec.scheduling.kinds.common import body_ops, body_results
from fusec.scheduling.kinds.over_budget import SplitOverBudget
from fusec.scheduling.pointwise import TRANSPOSE_TILE, pointwise_schedule, transpose_tile
from fusec.scheduling.register_estimate import RegisterEstimate
from fusec.scheduling.register_model import pointwise_estimate
from fusec.scheduling.schedule_cost import pointwise_kernel
from fusec.scheduling.transposed_plan import planned_group as plan_transposed
from fusec.scheduling.transposed_plan import tile_shared_bytes

POINTWISE_ELEMENTS = (1, 2, 4, 8)
"""Elements per thread a pointwise candidate takes."""
TILE_SIDES = (16, 32, 64)
"""Sides of a transposed-operand tile candidate (the model's is
`pointwise.TRANSPOSE_TILE`)."""
TILE_ELEMENTS = (2, 4, 8, 16)
"""Elements per thread of a transposed-tile candidate."""
POINTWISE_BLOCKS = (128, 256, 512)
"""Threads per block a pointwise candidate takes."""


class PointwiseKind(SplitOverBudget):
    """`kind = "pointwise"`."""

    name = "pointwise"

    def merge(self, c: Candidate, mine: GroupInfo, other: GroupInfo) -> Merged | str | None:
        """A concat or gather read in place first; then another pointwise
        group, or a transpose, slice or reshape (or a chain of them) folded
        into the loads."""
        if (indexed := indexed_read(c)) is not None:
            return indexed
        if other.kind == "pointwise":
            return merge_pointwise(mine, other)
        if other.kind == "view" and c.options.fold_views and all(
                isinstance(op, FOLDED_VIEWS) for op in other.ops):
            return view_operand(c)
        return None

    def summary_registers(self, ops: tuple[Operation, ...], inputs: frozenset[SSAValue],
                          outputs: list[SSAValue], target: Target) -> int:
        """Live values at the widest point of the op order plus arrays in
        flight and addressing, under the schedule `scheduling/pointwise.py`
        gives it on `target` (`pointwise_registers_of`, fitted to ptxas)."""
        epe = pointwise_schedule(target).int_field("elements_per_thread")
        return pointwise_registers_of(ops, inputs, outputs, epe)

    def summary_shared(self, ops: tuple[Operation, ...], shape: tuple[int, ...],
                       parts: int) -> int:
        """The padded tiles of the transposed operands (none: 0)."""
        return tile_bytes(ops, shape, TRANSPOSE_TILE)

    def kernel_path(self, info: GroupInfo) -> str:
        """The transposed-operand tile when a transpose moves the innermost axis."""
        tiled = tile_axes(info.ops, info.shape) is not None
        return "pointwise_transpose" if tiled else "pointwise"

    def choose(self, ctx: ScheduleContext, group: GroupOp) -> Choice:
        """Flat, or the transposed-operand tile when a transpose in the group
        moves the innermost axis (`scheduling/pointwise.transpose_tile`)."""
        shape = broadcast_shapes(*(tensor_shape(v) for v in body_results(group)))
        attr = pointwise_schedule(ctx.target, transpose_tile(body_ops(group), shape), group)
        if parts := attr.int_field("gather_parts"):
            used = tile_shared_bytes(plan_transposed(group, attr))
            return attr, (f"pointwise: the gather's table rows staged in shared memory "
                          f"({used} bytes), {parts} block(s) per row, "
                          f"{attr.int_field('block')} threads per block"), used
        if not attr.int_field("tile"):
            return attr, (f"pointwise: {attr.int_field('elements_per_thread')} elements per "
                          f"thread, {attr.int_field('block')} threads per block"), 0
        tile = attr.int_field("tile")
        used = tile_shared_bytes(plan_transposed(group, attr))
        return attr, (f"pointwise: {tile}x{tile} output tiles, transposed operands staged "
                      f"through shared memory, {attr.int_field('block')} threads per block"), used

    def priced_by_schedule(self, info: GroupInfo) -> bool:
        """No: the summary already counts its threads and sees a transposed tile."""
        return False

    def scheduled_kernel(self, ctx: ScheduleContext, group: GroupOp,
                         attr: ScheduleAttr | None) -> ScheduledKernel:
        """`elements_per_thread` per thread; the transposed tile on its own path."""
        tiled = attr is not None and attr.int_field("tile") > 0
        return pointwise_kernel(group, attr, "pointwise_transpose" if tiled else "pointwise")

    def candidates(self, group: GroupOp, first: ScheduleAttr, target: Target,
                   limit: int) -> list[ScheduleAttr]:
        """`POINTWISE_ELEMENTS` x `POINTWISE_BLOCKS` (a block no larger than
        the target launches; a staged gather both staged and read in place);
        a transposed tile (`tile` > 0): the sides of
        `TILE_SIDES` x `TILE_ELEMENTS` per thread whose block is whole rows
        of the tile, one to a few warps and within the target's block, and
        whose tiles fit `limit`."""
        if not isinstance(first, PointwiseSchedule):
            return []
        if first.int_field("tile") == 0:
            # a staged gather is also timed read in place (the rule that
            # chose staging counts sectors, not time)
            parts = sorted({0, first.int_field("gather_parts")})
            return [PointwiseSchedule.make(elements_per_thread=e, block=b, gather_parts=p)
                    for p in parts for e in POINTWISE_ELEMENTS for b in POINTWISE_BLOCKS
                    if b <= target.max_threads_per_block]
        out: list[ScheduleAttr] = []
        for side in TILE_SIDES:
            for e in TILE_ELEMENTS:
                block = side * side // e
                if block % side or not 32 <= block <= target.max_threads_per_block:
                    continue
                attr = PointwiseSchedule.make(elements_per_thread=e, block=block, tile=side)
                if tile_shared_bytes(plan_transposed(group, attr)) <= limit:
                    out.append(attr)
        return out

    def registers(self, group: GroupOp, target: Target,
                  tile: GemmTile | None = None) -> RegisterEstimate:
        """`register_model.pointwise_estimate`."""
        return pointwise_estimate(group, target)
