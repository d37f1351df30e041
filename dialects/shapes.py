"""Shape rules of the `nn` ops, as pure functions over integer tuples.

The dialect's verifiers, the reference interpreter and the code generator all
need the same arithmetic (broadcasting, reduced shapes, conv output sizes), so
it lives here once. Every function raises `ShapeError` with a sentence a user
can read; callers add the op and its location.
"""

from __future__ import annotations

from collections.abc import Sequence

Shape = tuple[int, ...]


class ShapeError(ValueError):
    """A shape rule was violated; the message says what was expected."""


def fmt(shape: Sequence[int]) -> str:
    """Print a shape the way it appears in a tensor type: `4x1024`."""
    return "x".join(str(d) for d in shape) if shape else "scalar"


def broadcast_shapes(*shapes: Sequence[int]) -> Shape:
    """NumPy broadcasting: align on the right, each dimension equal or 1."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[int] = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise ShapeError(
                "shapes " + ", ".join(fmt(s) for s in shapes) + " do not broadcast "
                f"(dimension {i - rank} has sizes {sorted(dims)})"
            )
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def normalize_axis(axis: int, rank: int) -> int:
    """Map a possibly negative axis into `[0, rank)`."""
    if rank == 0:
        raise ShapeError(f"axis {axis} is out of range: the operand has rank 0 (no axes)")
    if not -rank <= axis < rank:
        raise ShapeError(
            f"axis {axis} is out of range for rank {rank} (expected {-rank} to {rank - 1})"
        )
    return axis % rank if rank else 0


def normalize_axes(axes: Sequence[int], rank: int) -> tuple[int, ...]:
    """Normalize and sort reduction axes; duplicates are an error."""
    norm = [normalize_axis(a, rank) for a in axes]
    if len(set(norm)) != len(norm):
        raise ShapeError(f"axes {list(axes)} name the same dimension twice")
    return tuple(sorted(norm))


def reduced_shape(shape: Sequence[int], axes: Sequence[int], keepdims: bool) -> Shape:
    """Shape after reducing `axes` (already normalized)."""
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def matmul_shape(a: Sequence[int], b: Sequence[int]) -> Shape:
    """NumPy `matmul` for operands of rank >= 2, batch dimensions broadcast."""
    if len(a) < 2 or len(b) < 2:
        raise ShapeError(f"operands must have rank >= 2, got {fmt(a)} and {fmt(b)}")
    if a[-1] != b[-2]:
        raise ShapeError(
            f"contraction sizes differ: lhs {fmt(a)} has K = {a[-1]}, "
            f"rhs {fmt(b)} has K = {b[-2]}"
        )
    try:
        batch = broadcast_shapes(a[:-2], b[:-2])
    except ShapeError as err:
        raise ShapeError(f"batch dimensions do not broadcast: {err}") from None
    return (*batch, a[-2], b[-1])


def window_out(size: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    """Output length of a sliding window (conv or pool) along one dimension."""
    span = dilation * (kernel - 1) + 1
    return (size + pad - span) // stride + 1


def conv2d_shape(
    x: Sequence[int],
    w: Sequence[int],
    strides: Sequence[int],
    pads: Sequence[int],
    dilations: Sequence[int],
    groups: int,
) -> Shape:
    """NCHW input, OIHW weight; pads are [top, left, bottom, right]."""
    if len(x) != 4 or len(w) != 4:
        raise ShapeError(f"input and weight must have rank 4, got {fmt(x)} and {fmt(w)}")
    n, c, h, wd = x
    o, ci, kh, kw = w
    if c % groups:
        raise ShapeError(f"groups = {groups} does not divide the {c} input channels")
    if o % groups:
        raise ShapeError(f"groups = {groups} does not divide the {o} output channels")
    if ci != c // groups:
        raise ShapeError(
            f"weight has {ci} input channels per group, expected {c // groups} "
            f"({c} input channels / groups = {groups})"
        )
    oh = window_out(h, kh, strides[0], pads[0] + pads[2], dilations[0])
    ow = window_out(wd, kw, strides[1], pads[1] + pads[3], dilations[1])
    if oh < 1 or ow < 1:
        raise ShapeError(
            f"the {kh}x{kw} kernel does not fit the padded {h}x{wd} input "
            f"(output would be {oh}x{ow})"
        )
    return (n, o, oh, ow)


def pool2d_shape(
    x: Sequence[int], kernel: Sequence[int], strides: Sequence[int], pads: Sequence[int]
) -> Shape:
    """NCHW pooling output shape; pads are [top, left, bottom, right]."""
    if len(x) != 4:
        raise ShapeError(f"input must have rank 4 (NCHW), got {fmt(x)}")
    n, c, h, w = x
    oh = window_out(h, kernel[0], strides[0], pads[0] + pads[2], 1)
    ow = window_out(w, kernel[1], strides[1], pads[1] + pads[3], 1)
    if oh < 1 or ow < 1:
        raise ShapeError(
            f"the {kernel[0]}x{kernel[1]} window does not fit the padded {h}x{w} input"
        )
    return (n, c, oh, ow)


def slice_shape(
    shape: Sequence[int],
    starts: Sequence[int],
    limits: Sequence[int],
    strides: Sequence[int],
) -> Shape:
    """Static slice with 0 <= start <= limit <= dim and positive strides."""
    rank = len(shape)
    for name, vals in (("starts", starts), ("limits", limits), ("strides", strides)):
        if len(vals) != rank:
            raise ShapeError(
                f"attribute '{name}' has {len(vals)} entries, expected {rank} (one per dimension)"
            )
    out: list[int] = []
    for i, (d, s, lim, st) in enumerate(zip(shape, starts, limits, strides, strict=True)):
        if st < 1:
            raise ShapeError(f"stride {st} in dimension {i} must be positive")
        if s > lim:
            raise ShapeError(f"start {s} is greater than limit {lim} in dimension {i}")
        if s < 0 or lim > d:
            raise ShapeError(
                f"bounds [{s}, {lim}) in dimension {i} are outside the dimension's size {d}"
            )
        out.append((lim - s + st - 1) // st)
    return tuple(out)


def concat_shape(shapes: Sequence[Sequence[int]], axis: int) -> Shape:
    """Concatenation along `axis` (normalized); other dimensions must agree."""
    first = shapes[0]
    for k, s in enumerate(shapes[1:], start=1):
        if len(s) != len(first):
            raise ShapeError(f"operand #{k} has rank {len(s)}, operand #0 has rank {len(first)}")
        for i, (d0, d) in enumerate(zip(first, s, strict=True)):
            if i != axis and d0 != d:
                raise ShapeError(
                    f"operand #{k} has size {d} in dimension {i}, operand #0 has {d0} "
                    f"(only the concat axis {axis} may differ)"
                )
    total = sum(s[axis] for s in shapes)
    return (*first[:axis], total, *first[axis + 1 :])


def gather_shape(table: Sequence[int], indices: Sequence[int], axis: int) -> Shape:
    """`numpy.take(table, indices, axis)`."""
    return (*table[:axis], *indices, *table[axis + 1 :])


def numel(shape: Sequence[int]) -> int:
    """Number of elements of a shape."""
    n = 1
    for d in shape:
        n *= d
    return n
