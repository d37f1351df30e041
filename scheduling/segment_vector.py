"""The vector width of each segment of a concat kernel
(`scheduling/concat_segments.py`): how many consecutive elements of its
operand one thread takes per access, and which arrays it then loads and
stores wide.

A segment walks operand `k` of the concat in the operand's own row-major
order and writes the result at the same coordinates shifted by the
operand's offset along the concat axis. With `lanes = V` a thread takes V
consecutive elements of the operand's innermost axis per access, as the
flat schedule does (`scheduling/flat_vector.py`), when

- the operand's innermost axis longer than 1 is the result's (an operand
  one element wide along a last concat axis steps across rows instead);
- V divides the operand's extent along it and the result's (lane 0's
  coordinate is then a multiple of V in the operand, and no lane passes
  the end of a row in either), and `elements_per_thread` (a block's chunk
  is whole accesses);
- the shift keeps lane 0 at a multiple of V: the offset is a multiple of V
  where the concat axis is the innermost one (along an outer axis it moves
  whole rows);
- every read is wide or uniform: the operand's reads at its own
  coordinates (a view of a group input, or the elementwise ops the kernel
  evaluates it from) and the epilogue's at the result's, every result
  stored wide (`flat_vector.point_reads`, `flat_vector.wide_inputs`).

`dm41`'s roll of `[9, 64, 83, 256]` f32 along axis 2 by 2 moves 16 bytes per
access in both segments; a concat along the innermost axis of widths 35 and
24 keeps one element per access (35 is odd, and 35 shifts the second).
Each segment decides alone: `concat(x, y[:, 1:9])` along axis 0 reads `y`
one element into each row, so its segment moves one element per access
while `x`'s moves 4.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.ir import BlockArgument, OpResult, SSAValue

from fusec.analysis.group_body import GroupBody
from fusec.analysis.view_operands import CHAINED_VIEWS, INDEXED_READS, operand_view
from fusec.dialects import nn
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import Shape
from fusec.scheduling.concat_segments import segments
from fusec.scheduling.flat_vector import (
    SCALAR_ACCESS,
    FlatVector,
    LaneRead,
    innermost_axis,
    lane_choices,
    point_reads,
    result_dtype,
    root_reads,
    whole_read,
    wide_inputs,
)

if TYPE_CHECKING:  # the plan holds the widths: imported for types only
    from fusec.scheduling.transposed_plan import TransposedPlan


def operand_reads(body: GroupBody, v: SSAValue, domain: Shape, axis: int, lanes: int
                  ) -> list[tuple[BlockArgument, LaneRead]] | None:
    """The reads that evaluate concat operand `v` at a point of its own
    shape `domain` (`codegen/indexed_read.read_operand`: one load through a
    view, or the elementwise ops a point evaluator writes) and how lanes
    stepping along `axis` make them; None where one is not followed here
    (a concat or gather inside the operand)."""
    inside = set(body.ops)
    reads: list[tuple[BlockArgument, LaneRead]] = []
    seen: set[SSAValue] = set()
    stack = [v]
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)  # the evaluator loads each value once per point
        if isinstance(x, BlockArgument):
            reads.append((x, whole_read(tensor_shape(x), domain, axis)))
            continue
        assert isinstance(x, OpResult)
        op = x.op
        if isinstance(op, nn.ConstantOp):
            continue
        if isinstance(op, INDEXED_READS):
            return None
        if isinstance(op, CHAINED_VIEWS):
            found = operand_view(op, inside)
            if isinstance(found, str):
                return None
            reads += root_reads(*found, domain, axis, lanes, inside)
            continue
        stack.extend(op.operands)  # an elementwise op or a broadcast, at the same point
    return reads


def _segment_vector(plan: TransposedPlan, concat: nn.ConcatOp, k: int, offset: int,
                    dtype: str) -> FlatVector:
    """The widest access of the segment over operand `k` (at `offset` along
    the concat axis) that the module docstring's conditions allow."""
    shape = tuple(tensor_shape(concat.inputs[k]))
    axis = innermost_axis(shape)
    if axis is None or axis != innermost_axis(plan.shape):
        return SCALAR_ACCESS
    for lanes in lane_choices(dtype):
        if (shape[axis] % lanes or plan.shape[axis] % lanes or plan.unroll % lanes
                or (axis == concat.axis and offset % lanes)):
            continue
        inner = operand_reads(plan.body, concat.inputs[k], shape, axis, lanes)
        outer = point_reads(plan, axis, lanes, pinned=concat)
        if inner is None or outer is None:
            return SCALAR_ACCESS
        wide = wide_inputs(plan.body, inner + outer, lanes)
        if wide is None:
            continue
        return FlatVector(lanes, wide, frozenset(range(len(plan.body.outputs))))
    return SCALAR_ACCESS


def segment_vectors(plan: TransposedPlan, concat: nn.ConcatOp) -> tuple[FlatVector, ...]:
    """Each operand's access (by operand number; one element for an empty
    operand) in the segmented kernel of `plan` over `concat`."""
    out = [SCALAR_ACCESS] * len(concat.inputs)
    dtype = result_dtype(plan.body, plan.shape)
    if dtype is None:
        return tuple(out)
    for seg in segments(concat, plan.threads * plan.unroll):
        out[seg.operand] = _segment_vector(plan, concat, seg.operand, seg.offset, dtype)
    return tuple(out)

