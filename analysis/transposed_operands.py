"""Transposed operands of pointwise groups: which transposes a pointwise
kernel can read in place, and along which axes it tiles them.

A `nn.transpose` of a value read from memory, feeding elementwise ops, joins
their pointwise group instead of running as a copy kernel. Its result is read
at permuted coordinates. When the permutation keeps the operand's contiguous
axis innermost, that read is a plain strided read, coalesced like any other.
When it moves the contiguous axis elsewhere (the 2-D transpose, NCHW <->
NHWC, batched transposes), consecutive threads would read addresses far
apart; the group then runs the tiled schedule (`PointwiseSchedule.tile`): it
stages each such operand through a shared-memory tile spanning the output's
innermost axis and the operand's contiguous one (`codegen/pointwise_transpose.py`).

```mlir
%t = nn.transpose %x {perm = [1, 0]} : (tensor<33x47xf32>) -> tensor<47x33xf32>
%s = nn.add %t, %y : (tensor<47x33xf32>, tensor<47x33xf32>) -> tensor<47x33xf32>
```

`swapped_axis(%t's op)` is 0: the operand is contiguous along output axis 0,
so the tile spans output axes 0 and 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xdsl.ir import Operation, OpResult

from fusec.analysis.strided_view import StridedView
from fusec.dialects import nn
from fusec.dialects.element_types import element
from fusec.dialects.nn_base import element_type_name, tensor_shape
from fusec.dialects.shapes import fmt


def innermost_axis(shape: Sequence[int]) -> int | None:
    """The last axis of `shape` longer than 1 (None: every axis has size 1)."""
    return next((d for d in range(len(shape) - 1, -1, -1) if shape[d] > 1), None)


def swapped_axis(op: nn.TransposeOp) -> int | None:
    """The axis of `op`'s result along which its operand is contiguous, when
    that is not the result's innermost axis (size-1 axes aside); None when
    the permutation keeps the innermost axis in place (a coalesced read)."""
    view = StridedView.contiguous(op.operand_shape()).transpose(op.perm)
    inner = innermost_axis(view.shape)
    long_axes = [d for d in range(len(view.shape)) if view.shape[d] > 1]
    if inner is None:
        return None
    contiguous = min(long_axes, key=lambda d: view.strides[d])
    return None if contiguous == inner else contiguous


def transposes(ops: Iterable[Operation]) -> list[nn.TransposeOp]:
    """The transposes among `ops`, in order."""
    return [op for op in ops if isinstance(op, nn.TransposeOp)]


def tiled_transposes(ops: Iterable[Operation], shape: Sequence[int]) -> list[nn.TransposeOp]:
    """The transposes a pointwise kernel over `shape` stages through a tile:
    full-shaped ones that move the innermost axis."""
    return [op for op in transposes(ops)
            if tensor_shape(op.results[0]) == tuple(shape) and swapped_axis(op) is not None]


def tile_bytes(ops: Iterable[Operation], shape: Sequence[int], tile: int) -> int:
    """Shared memory of the tiled kernel: one `tile x (tile + 1)` array per
    distinct tiled operand, 8-byte elements for 64-bit types, else 4."""
    staged = {(op.operands[0], tuple(op.perm)): op for op in tiled_transposes(ops, shape)}
    return sum(tile * (tile + 1) * (8 if element(element_type_name(
        op.operands[0].type.element_type)).width == 8 else 4)  # type: ignore[attr-defined]
        for op in staged.values())


def tile_axes(ops: Iterable[Operation], shape: Sequence[int]) -> tuple[int, int] | None:
    """(the swapped axis, the innermost axis) of a pointwise kernel over
    `shape` with tiled transposes, None without any; assumes
    `transpose_refusal` found nothing."""
    tiled = tiled_transposes(ops, shape)
    inner = innermost_axis(shape)
    if not tiled or inner is None:
        return None
    axis = swapped_axis(tiled[0])
    assert axis is not None
    return axis, inner


def transpose_refusal(ops: Sequence[Operation], shape: Sequence[int]) -> str | None:
    """Why a pointwise kernel over `shape` holding `ops` cannot read its
    transposes, or None when it can: each must read a value from memory (not
    one the kernel computes), have the iteration shape, and all that move
    the innermost axis must move it to the same axis (one tile)."""
    inside = set(ops)
    axes: dict[int, nn.TransposeOp] = {}
    for op in transposes(ops):
        src = op.operands[0]
        if isinstance(src, OpResult) and src.op in inside:
            return (f"the transpose of {src.op.name} would read a value the same kernel "
                    "computes; a pointwise kernel transposes only operands it reads from memory")
        result = tensor_shape(op.results[0])
        if result != tuple(shape):
            return (f"the transposed value {fmt(result)} is broadcast to {fmt(shape)}; a "
                    "pointwise kernel reads a transposed operand only at the iteration shape")
        axis = swapped_axis(op)
        if axis is not None:
            axes.setdefault(axis, op)
    if len(axes) > 1:
        first, second = sorted(axes)[:2]
        return (f"its transposes move the innermost axis to axes {first} and {second} "
                f"(perm {axes[first].perm} and perm {axes[second].perm}); one tile "
                "serves one pair of axes")
    return None
