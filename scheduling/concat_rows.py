"""Whole rows per access: a concat along the innermost axis whose rows are
one word wide.

An interleave (`stack([a, b], -1)` reshaped to `[..., 2 n]`, the pairs of a
rotary embedding, `concat(x[..., None], y[..., None], -1)`) is a concat
along the innermost axis of operands 1 (or a few) elements wide. Its
segments (`scheduling/concat_segments.py`) each walk one operand and store
every `W`-th element of the result: a warp's store of 4-byte elements spans
`32 x W x 4` bytes, a `1 / W` part of each sector, and the rest of each
sector waits for the next operand's pass. dm23 (`3833x2999`, two f32
operands) ran at 77% of the copy floor that way, and torch.compile at 92%.

Here each access is one row of the result (`W` elements, the concat's
extent along the axis): lane `j` is pinned to the operand holding element
`j` of the row (the operand read at its own coordinates, as a segment
reads it), the epilogue runs per lane, and the row is stored as one word
(`W x item` bytes, at least 8: 2 or 4 f32, 4 or 8 halves). Consecutive threads
take consecutive rows, so each operand's loads are consecutive over the
warp's lanes and each store instruction covers whole sectors.

It applies when the concat is along the iteration's innermost axis (longer
than 1), its result is the iteration shape (a segmented concat: not under
another concat's select), every result has the iteration shape and one
dtype, `W` elements of that dtype are one word (`row_lanes`), and the
schedule's `elements_per_thread` is a multiple of `W`. Rows of other widths
(3 floats, 2 or 16 halves) keep the segments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fusec.dialects import nn
from fusec.dialects.element_types import of_device_dtype
from fusec.scheduling.flat_vector import FlatVector, innermost_axis, lane_choices, result_dtype

if TYPE_CHECKING:  # the plan holds the access: imported for types only
    from fusec.scheduling.transposed_plan import TransposedPlan

F32_PAIR = 2
"""A row of 2 floats is one 8-byte store (`st_vec2_f32`), a width the flat
schedule's reads do not use (`flat_vector.lane_choices`: 16-byte f32 words
only)."""
MIN_ROW_BYTES = 8
"""Rows narrower keep the segments: a bf16 interleave (`45x6264x89` pairs
plus a bias, dm47) ran 6% slower one 4-byte row per access than in
segments, where the f32 one (8-byte rows, dm23) ran 19% faster (H100,
2026-12-07, one run beside the other)."""


def row_lanes(dtype: str) -> tuple[int, ...]:
    """The row widths stored as one word of at least `MIN_ROW_BYTES` in
    device dtype `dtype`."""
    item = of_device_dtype(dtype).width
    widths = (*lane_choices(dtype), F32_PAIR) if dtype == "float32" else lane_choices(dtype)
    return tuple(w for w in widths if w * item >= MIN_ROW_BYTES)


def row_vector(plan: TransposedPlan, concat: nn.ConcatOp) -> FlatVector | None:
    """One whole row of `concat`'s result per access, stored as one word
    (every result wide, every input read per lane), when the module
    docstring's conditions hold; else None."""
    axis = innermost_axis(plan.shape)
    if axis is None or axis != concat.axis:
        return None
    dtype = result_dtype(plan.body, plan.shape)
    width = plan.shape[axis]
    if dtype is None or width not in row_lanes(dtype) or plan.unroll % width:
        return None
    return FlatVector(width, frozenset(), frozenset(range(len(plan.body.outputs))))
