"""Layout ops read in place by reduction groups, and the row layout that
keeps their reads coalesced.

A reduction kernel reads a slice, reshape or transpose of a value it reads
from memory (a group input, or an elementwise op of inputs it evaluates at
the source element, `codegen/computed_root.py`) through the chain's
composed strided view, exactly as a pointwise kernel does
(`analysis/view_operands.py`): the copy kernel of the view goes away.

```mlir
%s = nn.slice %x {starts = [0, 4], limits = [8, 36]} : (tensor<8x40xf32>) -> tensor<8x32xf32>
%e = nn.exp %s : tensor<8x32xf32>
%r = nn.reduce_sum %e {axes = [1], keepdims = true} : (tensor<8x32xf32>) -> tensor<8x1xf32>
```

is one row kernel loading `x[i * 40 + 4 + j]`.

The two reduction layouts (`scheduling/reduction_schedule.py`) walk one axis of the
iteration space fastest across a warp: the row layout the last reduced axis
(lanes of a row), the column layout the last kept axis (consecutive rows).
A read or write is coalesced when that axis is its contiguous one (the
smallest stride; a broadcast axis is free). A transposed operand of a row
reduction (`reduce_sum(transpose(x))` over its last axis) is contiguous
along the kept axis: the group takes the column layout instead. When no
layout serves every element-wise access (`softmax(transpose(x))` reads the
transposed `x` but writes its result row-major), the view stays a copy
kernel, whose shared-memory tile makes both of its sides coalesced: the
fused kernel would move fewer bytes, but every store of it (or every load)
would touch a sector of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from xdsl.ir import Operation, SSAValue

from fusec.analysis.strided_view import StridedView
from fusec.analysis.view_operands import (
    FOLDED_VIEWS,
    computed_ops,
    feeds_indexed_reads,
    input_reads,
    view_refusal,
)
from fusec.dialects.nn_base import tensor_shape

Layout = Literal["row", "column"]


def folded_views(ops: Sequence[Operation]) -> list[Operation]:
    """The slices, reshapes and transposes among `ops` read through strided
    views (not those that only feed a concat or gather)."""
    inside = set(ops)
    return [op for op in ops if isinstance(op, FOLDED_VIEWS)
            and not feeds_indexed_reads(op, inside)]


def natural_layout(shape: Sequence[int], axes: Sequence[int]) -> Layout:
    """The layout of a reduction whose operands are row-major: column when
    the last axis is kept and the reduced axes are not trailing."""
    rank = len(shape)
    trailing = tuple(axes) == tuple(range(rank - len(axes), rank))
    return "column" if not trailing and rank - 1 not in axes else "row"


def read_layout(ops: Sequence[Operation], inputs: Iterable[SSAValue],
                outputs: Iterable[SSAValue], shape: Sequence[int],
                axes: Sequence[int]) -> Layout | None:
    """The layout in which every access of a reduction group of `ops` that
    varies along its rows is coalesced (the natural one first), or None."""
    accesses = _accesses(ops, inputs, outputs, tuple(shape), tuple(axes))
    first = natural_layout(shape, axes)
    for layout in (first, "column" if first == "row" else "row"):
        fast = _fast_axis(tuple(shape), tuple(axes), layout)
        if all(_coalesced(a, fast) for a in accesses):
            return layout
    return None


def reduction_view_refusal(ops: Sequence[Operation], inputs: Iterable[SSAValue],
                           outputs: Iterable[SSAValue], shape: Sequence[int],
                           axes: Sequence[int]) -> str | None:
    """Why a reduction kernel over `shape` holding `ops` cannot read its
    slices, reshapes and transposes in place, or None when it can."""
    if not folded_views(ops):
        return None
    refusal = view_refusal(ops, shape)
    if refusal is not None:
        return refusal
    if read_layout(ops, inputs, outputs, shape, axes) is None:
        return ("the view is contiguous along another axis than the row-shaped values "
                "the kernel reads or writes, so neither reduction layout coalesces both "
                "(the view stays a copy through a shared-memory tile)")
    return None


def _accesses(ops: Sequence[Operation], inputs: Iterable[SSAValue],
              outputs: Iterable[SSAValue], shape: tuple[int, ...],
              axes: tuple[int, ...]) -> list[StridedView]:
    """Every read and write the kernel makes per row element, as a view
    aligned to `shape` (stride 0 along the axes it broadcasts over)."""
    found: list[StridedView] = []
    computed = computed_ops(set(ops))
    for v in inputs:
        views, whole = input_reads(ops, v, computed)
        found += views
        if whole:
            found.append(StridedView.contiguous(tensor_shape(v)))
    found += [StridedView.contiguous(tensor_shape(v)) for v in outputs]
    aligned = [a for v in found if (a := _aligned(v, shape)) is not None]
    return [a for a in aligned if any(a.strides[d] and shape[d] > 1 for d in axes)]


def _aligned(view: StridedView, shape: tuple[int, ...]) -> StridedView | None:
    """`view` right-aligned to `shape`, or None when it does not broadcast
    into it (a value of the kept axes alone, read once per row)."""
    offset = len(shape) - len(view.shape)
    if offset < 0 or any(n not in (1, shape[offset + d]) for d, n in enumerate(view.shape)):
        return None
    strides = [0] * offset + [s if n != 1 else 0 for n, s in zip(view.shape, view.strides,
                                                                 strict=True)]
    return StridedView(shape, tuple(strides), view.offset)


def _fast_axis(shape: tuple[int, ...], axes: tuple[int, ...], layout: Layout) -> int | None:
    """The axis consecutive threads of a warp step along in `layout`."""
    axis = [d for d, n in enumerate(shape) if n > 1 and (d in axes) == (layout == "row")]
    return axis[-1] if axis else None


def _coalesced(access: StridedView, fast: int | None) -> bool:
    """Whether stepping along `fast` is stepping along the access's
    contiguous axis (or not moving at all)."""
    if fast is None or access.strides[fast] == 0:
        return True
    inner = min(abs(s) for s in access.strides if s)
    return abs(access.strides[fast]) == inner
