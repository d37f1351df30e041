"""A chain of views as one quasi-affine index map: reshapes that merge
dimensions which are not contiguous (after a transpose) included.

`StridedView` (`analysis/strided_view.py`) covers the chains NumPy reshapes
without a copy. Merging the dimensions a transpose left apart has no such
form: the head merge `[B, H, S, D] -> [B, S, H, D] -> [B, S, H * D]` reads
dimension `H * D` of its result at stride `S * D` across heads and 1 within
one. It is still a product of strided pieces: each result dimension splits
into *parts* (here `H` and `D`), each part with its own stride, and a
coordinate `c` of a dimension of parts `(p0, p1)` is part coordinates
`(c // p1, c % p1)`. Divisions and remainders by constants: quasi-affine.

```python
m = compose((2, 8, 353, 64), chain)     # transpose [0, 2, 1, 3], reshape to 2x353x512
m.parts                                  # ((2,), (353,), (8, 64))
m.fine                                   # StridedView((2, 353, 8, 64), (180736, 64, 22592, 1))
```

`compose` keeps the plain strided view whenever there is one (so kernels
that read plain views stay as they are) and builds the parts only where a
reshape merges what is not contiguous. A reshape whose sizes do not factor
into the parts (`[4, 6]` transposed, then read as `[8, 3]`) and a slice
across the parts of a merged dimension have no such map: the chain stays a
copy.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.ir import Operation

from fusec.analysis.strided_view import StridedView, forward
from fusec.dialects import nn
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import numel

Part = tuple[int, int]
"""A piece of a dimension: its size and its stride in the root buffer."""


@dataclass(frozen=True)
class ViewMap:
    """Element `idx` of a value of `shape`: coordinate `idx[d]` splits
    row-major into one coordinate per part of `parts[d]` (outermost first;
    none for a size-1 dimension), and the part coordinates index `fine`, a
    strided view of the root over all parts in order."""

    shape: tuple[int, ...]
    parts: tuple[tuple[int, ...], ...]
    fine: StridedView

    def split(self, coords: Sequence[str], div: Callable[[str, int], str],
              mod: Callable[[str, int], str]) -> list[str]:
        """The coordinate of each part (in `fine`'s order), from the
        coordinates of the dimensions (`div` and `mod` write `c // k` and
        `c % k` in the kernel's index type)."""
        out: list[str] = []
        for c, sizes in zip(coords, self.parts, strict=True):
            for j, size in enumerate(sizes):
                inner = numel(sizes[j + 1:])
                part = div(c, inner) if inner > 1 else c
                out.append(mod(part, size) if j else part)
        return out


class _Parts:
    """The parts of each dimension while a chain is composed."""

    def __init__(self, dims: list[list[Part]], offset: int) -> None:
        self.dims = dims
        self.offset = offset

    @staticmethod
    def contiguous(shape: Sequence[int]) -> _Parts:
        strides = StridedView.contiguous(shape).strides
        return _Parts([[(n, s)] if n != 1 else [] for n, s in zip(shape, strides, strict=True)],
                      0)

    def transpose(self, perm: Sequence[int]) -> _Parts:
        return _Parts([self.dims[p] for p in perm], self.offset)

    def slice(self, op: nn.SliceOp) -> _Parts | None:
        """Only dimensions taken whole, or of one part, can be sliced."""
        dims: list[list[Part]] = []
        offset = self.offset
        for parts, start, step, m in zip(self.dims, op.starts, op.strides,
                                         tensor_shape(op.results[0]), strict=True):
            if start == 0 and step == 1 and m == numel([n for n, _ in parts]):
                dims.append(parts)
                continue
            if len(parts) > 1:
                return None  # a slice across merged parts has no strided form
            stride = parts[0][1] if parts else 0
            offset += start * stride
            dims.append([(m, stride * step)] if m != 1 else [])
        return _Parts(dims, offset)

    def reshape(self, shape: Sequence[int]) -> _Parts | None:
        """The parts in order, regrouped into `shape`'s dimensions; a part
        splits where a new dimension ends inside it, if the sizes divide."""
        queue = [p for parts in self.dims for p in parts]
        dims: list[list[Part]] = []
        for m in shape:
            parts: list[Part] = []
            need = m
            while need > 1:
                if not queue:
                    return None
                n, s = queue[0]
                if need % n == 0:
                    parts.append(queue.pop(0))
                    need //= n
                elif n % need == 0:
                    parts.append((need, s * (n // need)))
                    queue[0] = (n // need, s)
                    need = 1
                else:
                    return None  # sizes that do not factor into the parts
            dims.append(parts)
        return None if queue else _Parts(dims, self.offset)

    def merged(self) -> list[list[Part]]:
        """Each dimension with neighbouring parts that are contiguous with
        each other merged into one."""
        out: list[list[Part]] = []
        for parts in self.dims:
            merged: list[Part] = []
            for n, s in parts:
                if merged and merged[-1][1] == n * s:
                    merged[-1] = (merged[-1][0] * n, s)
                else:
                    merged.append((n, s))
            out.append(merged)
        return out


def _apply(parts: _Parts, op: Operation) -> _Parts | None:
    if isinstance(op, nn.TransposeOp):
        return parts.transpose(op.perm)
    if isinstance(op, nn.SliceOp):
        return parts.slice(op)
    if isinstance(op, nn.ReshapeOp):
        return parts.reshape(tensor_shape(op.results[0]))
    return None


def compose(shape: Sequence[int], chain: Sequence[Operation]) -> StridedView | ViewMap | None:
    """The view of the last op of `chain` (slices, reshapes and transposes,
    each reading the one before, the first reading a contiguous value of
    `shape`): a strided view when there is one, else its parts, else None."""
    view: StridedView | None = StridedView.contiguous(shape)
    for link in chain:
        view = forward(view, link) if view is not None else None
    if view is not None or 0 in shape:
        return view
    parts: _Parts | None = _Parts.contiguous(shape)
    for link in chain:
        parts = _apply(parts, link) if parts is not None else None
    if parts is None:
        return None
    dims = parts.merged()
    result = tensor_shape(chain[-1].results[0])
    if all(len(d) <= 1 for d in dims):  # every dimension one strided piece after all
        return StridedView(tuple(result), tuple(d[0][1] if d else 0 for d in dims), parts.offset)
    fine = StridedView(tuple(n for d in dims for n, _ in d), tuple(s for d in dims for _, s in d),
                       parts.offset)
    return ViewMap(tuple(result), tuple(tuple(n for n, _ in d) for d in dims), fine)


def as_map(view: StridedView | ViewMap) -> ViewMap:
    """A strided view as the map of one part per dimension (none for size 1)."""
    if isinstance(view, ViewMap):
        return view
    keep = [d for d, n in enumerate(view.shape) if n != 1]
    fine = StridedView(tuple(view.shape[d] for d in keep), tuple(view.strides[d] for d in keep),
                       view.offset)
    return ViewMap(view.shape, tuple((n,) if n != 1 else () for n in view.shape), fine)


def common_parts(first: Sequence[int], second: Sequence[int]) -> tuple[int, ...] | None:
    """Parts of one dimension that split both partitions `first` and
    `second` of it further (the cuts of both), or None when no such parts
    exist (`(2, 3)` and `(3, 2)`)."""
    cuts = sorted({1, *(numel(first[j:]) for j in range(len(first))),
                   *(numel(second[j:]) for j in range(len(second)))})
    if any(outer % inner for inner, outer in itertools.pairwise(cuts)):
        return None
    return tuple(outer // inner for inner, outer in itertools.pairwise(cuts))[::-1]


def iteration_parts(shape: Sequence[int], maps: Sequence[ViewMap]
                    ) -> tuple[tuple[int, ...], ...] | None:
    """The parts of each dimension of iteration `shape` that every map
    (right-aligned, broadcast along its size-1 dimensions) reads linearly
    over, or None when their parts conflict."""
    parts: list[tuple[int, ...]] = [(n,) if n != 1 else () for n in shape]
    for m in maps:
        lead = len(shape) - len(m.shape)
        for d, sizes in enumerate(m.parts):
            if m.shape[d] == shape[lead + d]:
                found = common_parts(parts[lead + d], sizes)
                if found is None:
                    return None
                parts[lead + d] = found
    return tuple(parts)


def fine_access(view: StridedView | ViewMap, shape: Sequence[int],
                parts: Sequence[Sequence[int]]) -> tuple[int, tuple[int, ...]] | None:
    """The offset and the stride along each part of `parts` (of iteration
    `shape`) of `view` right-aligned against `shape` (stride 0 where it is
    broadcast), or None when `parts` do not split its own parts."""
    m = as_map(view)
    lead = len(shape) - len(m.shape)
    strides: list[int] = []
    k = 0  # the next part of `m.fine`
    for d, sizes in enumerate(parts):
        own = m.parts[d - lead] if d >= lead and m.shape[d - lead] != 1 else ()
        if not own:
            strides += [0] * len(sizes)
            continue
        queue = list(sizes)
        for _ in own:
            n, s = m.fine.shape[k], m.fine.strides[k]
            k += 1
            group: list[int] = []
            while numel(group) < n and queue:
                group.append(queue.pop(0))
            if numel(group) != n:
                return None
            strides += [s * numel(group[j + 1:]) for j in range(len(group))]
    return m.fine.offset, tuple(strides)
