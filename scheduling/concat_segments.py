"""Operand-major schedules of a pointwise kernel that computes a concat.

A pointwise group that iterates over the result of an `nn.concat` (its
iteration shape is the concat's shape) would, on the flat schedule, pick the
operand of every element by a branch on its coordinate along the axis: the
lanes of one warp straddle operands at every boundary and run each arm in
turn, and every arm's loads and arithmetic sit in every thread's code path.

Instead the grid is cut into one *segment* per non-empty operand: segment
`k` has `ceil(numel(operand k) / chunk)` blocks, which walk operand `k` in
its own row-major order (consecutive threads read consecutive elements of
it, as a copy does) and write the concat's result at the same coordinates
shifted by the operand's offset along the axis. A block tests `blockIdx.x`
against literal segment bounds once, so no warp ever diverges over
operands, and each element runs only its own operand's expression.

```text
concat(a: 4x3, b: 4x5, axis 1), 2 threads x 2 elements per block
segment 0: blocks [0, 3) walk a's 12 elements, write out[r, c]
segment 1: blocks [3, 8) walk b's 20 elements, write out[r, 3 + c]
```

That is the layout for rows (the result from the axis inwards) at least half
a block's chunk wide. Narrower rows would leave the sectors two operands
share at every boundary half-written by one segment's block and finished by
another's much later; there each block takes `rows_per_block` whole rows and
visits every operand in turn, walking that operand's part of its rows (one
contiguous run of the operand), so one block writes whole rows of the result.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation

from fusec.analysis.concat_operands import concat_pieces
from fusec.analysis.group_body import GroupBody
from fusec.analysis.view_operands import read_directly
from fusec.dialects import nn
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import Shape, numel


@dataclass(frozen=True)
class Segment:
    """Operand `operand` of the concat: its shape, its offset along the
    axis, and the blocks before it (`first_block`) and its own (`blocks`)."""

    operand: int
    shape: Shape
    offset: int
    first_block: int
    blocks: int


def segmented_concat(body: GroupBody, shape: Shape) -> nn.ConcatOp | None:
    """The concat the kernel of `body` (iterating over `shape`) is cut into
    segments by: one whose result is the whole iteration shape and that the
    kernel reads directly (not under another concat's select), with at least
    two non-empty operands; else None."""
    pieces: set[Operation] = concat_pieces(body.ops)
    for op in body.ops:
        if (isinstance(op, nn.ConcatOp) and tuple(tensor_shape(op.result)) == tuple(shape)
                and op not in pieces and read_directly(body, op)
                and sum(1 for v in op.inputs if numel(tensor_shape(v))) >= 2):
            return op
    return None


def segments(concat: nn.ConcatOp, chunk: int) -> list[Segment]:
    """The non-empty operands of `concat`, each with its blocks of `chunk`
    elements, in order."""
    out: list[Segment] = []
    offset = first = 0
    for k, v in enumerate(concat.inputs):
        shape = tuple(tensor_shape(v))
        n = numel(shape)
        if n:
            blocks = -(-n // chunk)
            out.append(Segment(k, shape, offset, first, blocks))
            first += blocks
        offset += shape[concat.axis]
    return out


def outer_rows(concat: nn.ConcatOp) -> int:
    """Rows of the concat's result: the product of the extents before the axis."""
    return numel(tuple(tensor_shape(concat.result))[:concat.axis])


def rows_per_block(concat: nn.ConcatOp, chunk: int) -> int | None:
    """Whole rows (`outer_rows`) per block when a row of the result, every
    operand's part of it, is narrower than a block's `chunk` of elements
    (`chunk // row`), else None (one segment of blocks per operand)."""
    row = numel(tuple(tensor_shape(concat.result))[concat.axis:])
    if not row or row * 2 > chunk:
        return None
    return chunk // row
