"""How a reduction group's kernel walks its rows, as `scheduling/reduction_schedule.py`
will schedule it, for the cost model that prices groups before they are
scheduled (`fusion_legality.kernel_cost`).

A group whose reductions form one stage and that writes no row-shaped
output is split over blocks when its rows are few (it fills the GPU). A
group with several passes is not: its threads are its rows times the lanes
a block holds. A softmax's max and sum of exps share one pass
(`online_softmax_max`).

The passes that read a row again from memory when it does not stay on chip
are not priced: fusion merges two groups at a time, and the steps towards a
one-kernel column softmax (max with its shifted exps, before the sum and the
division join) would each look slower than their parts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from xdsl.ir import Operation, OpResult, SSAValue

from fusec.dialects import nn
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import numel

# Mirrors of scheduling/reduction_schedule.py (analysis may not import it): the
# columns of the widest column block, and the elements a lane of a split row
# reduces at least.
MIN_COLUMN_ROWS = 16
SPLIT_ELEMS_PER_THREAD = 64


def online_softmax_max(r: nn.ReduceOp) -> nn.ReduceMaxOp | None:
    """The `reduce_max` whose pass `r` can share: `r` is the `reduce_sum` of
    `exp(a - max(a))` (the online softmax statistics); else None."""
    if not isinstance(r, nn.ReduceSumOp):
        return None
    e = r.operands[0]
    if not isinstance(e, OpResult) or not isinstance(e.op, nn.ExpOp):
        return None
    d = e.op.operands[0]
    if not isinstance(d, OpResult) or not isinstance(d.op, nn.SubOp):
        return None
    m = d.op.operands[1]
    if not isinstance(m, OpResult) or not isinstance(m.op, nn.ReduceMaxOp):
        return None
    return m.op if d.op.operands[0] is m.op.operands[0] else None


@dataclass(frozen=True)
class RowPasses:
    """The passes over the row a reduction group's kernel makes."""

    stages: int  # reduction passes (a chain of reductions)
    final: bool  # a last pass writes row-shaped outputs

    @property
    def splittable(self) -> bool:
        """Whether the scheduler may split rows over blocks."""
        return self.stages == 1 and not self.final


def row_passes(ops: Iterable[Operation], outputs: Iterable[SSAValue],
               axes: tuple[int, ...], rank: int) -> RowPasses:
    """The passes of a reduction group of `ops` reducing `axes` of a rank
    `rank` shape, writing `outputs`."""
    ops = list(ops)
    members = set(ops)
    stage: dict[SSAValue, int] = {}
    stages = 1
    for op in ops:
        base = max((stage.get(v, 0) for v in op.operands), default=0)
        reduces = isinstance(op, nn.ReduceOp)
        for r in op.results:
            stage[r] = base + 1 if reduces else base
        if reduces:
            stages = max(stages, base + 1)
    final = any(isinstance(v, OpResult) and v.op in members and _spans_row(v, axes, rank)
                for v in outputs)
    return RowPasses(stages, final)


def _spans_row(v: SSAValue, axes: tuple[int, ...], rank: int) -> bool:
    shape = tensor_shape(v)
    offset = rank - len(shape)
    return any(shape[a - offset] != 1 for a in axes if a >= offset)


def reduction_threads(passes: RowPasses, shape: tuple[int, ...], axes: tuple[int, ...],
                      block_threads: int, resident: int, estimate: int) -> int:
    """Threads the kernel runs: a split fills the GPU (`resident`); a
    multi-pass kernel holds at most `block_threads` per block (a column block
    `MIN_COLUMN_ROWS` rows of them at the widest); else `estimate` (the plain
    model's)."""
    total = numel(shape)
    row = numel(tuple(shape[a] for a in axes))
    rows = max(1, total // max(1, row))
    if passes.splittable:
        return max(estimate, min(resident, total // SPLIT_ELEMS_PER_THREAD))
    column = len(shape) - 1 not in axes
    lanes = block_threads // MIN_COLUMN_ROWS if column else block_threads
    return min(estimate, rows * min(lanes, row))

