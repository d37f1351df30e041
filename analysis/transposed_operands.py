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
A transpose may end a chain of slices and reshapes (`analysis/view_operands.py`):
the tile is then staged from the chain's composed strided view of its root.

```mlir
%t = nn.transpose %x {perm = [1, 0]} : (tensor<33x47xf32>) -> tensor<47x33xf32>
%s = nn.add %t, %y : (tensor<47x33xf32>, tensor<47x33xf32>) -> tensor<47x33xf32>
```

`swapped_axis(%t's op)` is 0: the operand is contiguous along output axis 0,
so the tile spans output axes 0 and 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xdsl.ir import Operation, OpResult, SSAValue

from fusec.analysis.concat_operands import concat_pieces
from fusec.analysis.strided_view import StridedView
from fusec.analysis.targets import WARP_SIZE
from fusec.analysis.view_map import ViewMap, fine_access, iteration_parts
from fusec.analysis.view_operands import (
    CHAINED_VIEWS,
    SECTOR_BYTES,
    chain_links,
    is_chain_end,
    operand_map,
)
from fusec.dialects import nn
from fusec.dialects.element_types import element
from fusec.dialects.nn_base import element_type_name, tensor_shape
from fusec.dialects.shapes import fmt, numel


def innermost_axis(shape: Sequence[int]) -> int | None:
    """The last axis of `shape` longer than 1 (None: every axis has size 1)."""
    return next((d for d in range(len(shape) - 1, -1, -1) if shape[d] > 1), None)


def view_swapped_axis(view: StridedView) -> int | None:
    """The axis of `view` along which its buffer is contiguous (the smallest
    stride), when that is not its innermost axis (size-1 axes aside); None
    when the view keeps the innermost axis in place (a coalesced read)."""
    inner = innermost_axis(view.shape)
    long_axes = [d for d in range(len(view.shape)) if view.shape[d] > 1]
    if inner is None:
        return None
    contiguous = min(long_axes, key=lambda d: abs(view.strides[d]))
    return None if contiguous == inner else contiguous


def swapped_axis(op: nn.TransposeOp) -> int | None:
    """`view_swapped_axis` of transpose `op` of a contiguous operand."""
    return view_swapped_axis(StridedView.contiguous(op.operand_shape()).transpose(op.perm))


def transposes(ops: Iterable[Operation]) -> list[nn.TransposeOp]:
    """The transposes among `ops`, in order."""
    return [op for op in ops if isinstance(op, nn.TransposeOp)]


Staged = tuple[Operation, SSAValue, StridedView | ViewMap]
"""A chain end staged through the tile: the op, its root value, its view
(or index map, `analysis/view_map.py`)."""

Parts = tuple[tuple[int, ...], ...]
"""The parts each iteration dimension splits into (`view_map.iteration_parts`)."""


def _fine(view: StridedView | ViewMap) -> StridedView:
    return view.fine if isinstance(view, ViewMap) else view


def staged_views(ops: Sequence[Operation], shape: Sequence[int]) -> list[Staged]:
    """The layout ops a pointwise kernel over `shape` stages through a tile:
    full-shaped chain ends (a transpose, or slices, reshapes and transposes
    composed, `view_operands.operand_map`) whose view moves the innermost axis."""
    inside = set(ops)
    out: list[Staged] = []
    for op in ops:
        if not isinstance(op, CHAINED_VIEWS) or not is_chain_end(op, inside) or (
                tensor_shape(op.results[0]) != tuple(shape)):
            continue
        found = operand_map(op, inside)
        if not isinstance(found, str) and view_swapped_axis(_fine(found[1])) is not None:
            out.append((op, *found))
    return out


def map_reads(ops: Sequence[Operation]) -> list[ViewMap]:
    """The index maps (`analysis/view_map.py`) of the chains a pointwise
    kernel holding `ops` reads."""
    inside = set(ops)
    found = [operand_map(op, inside) for op in ops
             if isinstance(op, CHAINED_VIEWS) and is_chain_end(op, inside)]
    return [f[1] for f in found if not isinstance(f, str) and isinstance(f[1], ViewMap)]


def tile_iteration(ops: Sequence[Operation], shape: Sequence[int]
                   ) -> tuple[Parts | None, dict[int, Operation]] | None:
    """How the tiled kernel over `shape` iterates: the parts it splits each
    dimension into (None: the dimensions themselves, no index map is read)
    and each staged op by the iteration axis it is contiguous along; None
    when the index maps' parts conflict (no tile: the flat schedule reads
    every map at divided coordinates)."""
    maps = map_reads(ops)
    parts = iteration_parts(shape, maps) if maps else None
    if maps and parts is None:
        return None
    axes: dict[int, Operation] = {}
    for op, _, view in _fine_staged(ops, shape, parts):
        axis = view_swapped_axis(view)
        if axis is not None:
            axes.setdefault(axis, op)
    return parts, axes


def _fine_staged(ops: Sequence[Operation], shape: Sequence[int], parts: Parts | None
                 ) -> list[tuple[Operation, SSAValue, StridedView]]:
    """`staged_views`, each view over the iteration's parts (`parts`)."""
    out: list[tuple[Operation, SSAValue, StridedView]] = []
    for op, root, view in staged_views(ops, shape):
        if parts is None:
            out.append((op, root, _fine(view)))
            continue
        access = fine_access(view, shape, parts)
        assert access is not None  # `iteration_parts` splits every map's parts
        out.append((op, root, StridedView(tuple(n for p in parts for n in p), access[1],
                                          access[0])))
    return out


def whole_sector_runs(shape: Sequence[int], axis: int, view: StridedView, item: int) -> bool:
    """Whether the flat schedule already reads `view` in whole sectors: its
    consecutive threads walk the iteration axes inside `axis` (`inner`
    points) before they step along it, so a warp reads `WARP_SIZE // inner`
    consecutive elements of each of `inner` runs. Runs of at least a sector
    (the pixel shuffle's `[..., W, r]` with r = 2 in f32: 16 floats, 64
    bytes) waste no bandwidth, and a tile whose innermost side is `inner`
    long (2) would leave most of its threads idle."""
    inner = numel(shape[axis + 1:])
    return abs(view.strides[axis]) == 1 and inner <= WARP_SIZE and (
        WARP_SIZE // inner) * item >= SECTOR_BYTES


def tiled_transposes(ops: Sequence[Operation], shape: Sequence[int]) -> list[Operation]:
    """The layout ops of `staged_views`."""
    return [op for op, _, _ in staged_views(ops, shape)]


def tile_bytes(ops: Sequence[Operation], shape: Sequence[int], tile: int) -> int:
    """Shared memory of the tiled kernel: one `tile x (tile + 1)` array per
    distinct tiled operand, 8-byte elements for 64-bit types, else 4."""
    if tile_axes(ops, shape) is None:
        return 0
    staged = {(root, view): root for _, root, view in staged_views(ops, shape)}
    return sum(tile * (tile + 1) * (8 if element(element_type_name(
        root.type.element_type)).width == 8 else 4)  # type: ignore[attr-defined]
        for root in staged.values())


def tile_axes(ops: Sequence[Operation], shape: Sequence[int]) -> tuple[int, int] | None:
    """(the swapped axis, the innermost axis) of a pointwise kernel over
    `shape` with tiled operands, None without any; axes of the parts it
    iterates over where it reads an index map (`tile_iteration`); assumes
    `transpose_refusal` found nothing."""
    found = tile_iteration(ops, shape)
    if found is None or not found[1]:
        return None
    parts, axes = found
    fine = shape if parts is None else [n for p in parts for n in p]
    inner, axis = innermost_axis(fine), next(iter(axes))
    if inner is None or all(whole_sector_runs(fine, axis, view, _item(root))
                            for _, root, view in _fine_staged(ops, shape, parts)):
        return None
    return axis, inner


def _item(root: SSAValue) -> int:
    return element(element_type_name(root.type.element_type)).width  # type: ignore[attr-defined]


def _describe(op: Operation) -> str:
    return f"perm {op.perm}" if isinstance(op, nn.TransposeOp) else f"{op.name}"


def _concat_reading(op: Operation, inside: set[Operation]) -> Operation | None:
    """The concat whose computed operand layout op `op` is part of (every
    reader, inside, a concat or another such op: `concat_pieces`), if any."""
    if op not in concat_pieces(inside):
        return None
    while not isinstance(op, nn.ConcatOp):
        op = next(u.operation for r in op.results for u in r.uses if u.operation in inside)
    return op


def transpose_refusal(ops: Sequence[Operation], shape: Sequence[int]) -> str | None:
    """Why a pointwise kernel over `shape` holding `ops` cannot read its
    transposes, or None when it can: each must read a value from memory (not
    one the kernel computes, a chain of layout ops of one aside), a chain
    through a transpose must have the iteration shape, and all that move
    the innermost axis must move it to the same axis (one tile)."""
    inside = set(ops)
    for op in transposes(ops):
        src = op.operands[0]
        if isinstance(src, OpResult) and src.op in inside and not isinstance(
                src.op, CHAINED_VIEWS):
            return (f"the transpose of {src.op.name} would read a value the same kernel "
                    "computes; a pointwise kernel transposes only operands it reads from memory")
    for op in ops:
        if not isinstance(op, CHAINED_VIEWS) or not is_chain_end(op, inside) or not any(
                isinstance(link, nn.TransposeOp) for link in chain_links(op, inside)):
            continue
        result = tensor_shape(op.results[0])
        if result != tuple(shape) and (concat := _concat_reading(op, inside)) is not None:
            link = next(t for t in chain_links(op, inside) if isinstance(t, nn.TransposeOp))
            return (f"a computed operand of {concat.name} reads a transpose "
                    f"({_describe(link)}) at {fmt(result)}; a kernel evaluates a concat's "
                    "computed operands per element at the operand's own coordinates, under "
                    "the concat's select, and reads a transposed value only at its iteration "
                    f"coordinates ({fmt(shape)})")
        if result != tuple(shape):
            return (f"the transposed value {fmt(result)} is broadcast to {fmt(shape)}; a "
                    "pointwise kernel reads a transposed operand only at the iteration shape")
    found = tile_iteration(ops, shape)
    axes = found[1] if found is not None else {}
    if len(axes) > 1:
        first, second = sorted(axes)[:2]
        return (f"its transposes move the innermost axis to axes {first} and {second} "
                f"({_describe(axes[first])} and {_describe(axes[second])}); one tile "
                "serves one pair of axes")
    return None
