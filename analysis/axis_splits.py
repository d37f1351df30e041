"""Splits of merged axes: a value whose axes were merged by a reshape
(`[B, H, S, D]` to `[B*H, S, D]`) and the split form it came from, as
`unmerge-broadcasts` tracks them (`Split`), and the shape algebra its
rewrites need: which split axes a merged axis covers (`merge_groups`), the
shape another operand takes in a split form (`split_shape`), and two splits
of one axis brought to their common refinement (`refine`).

```mlir
%m = nn.reshape %x : (tensor<2x3x8x4xf32>) -> tensor<6x8x4xf32>
// merge_groups((2, 3, 8, 4), (6, 8, 4)) == ((0, 1), (2,), (3,))
```
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate, pairwise
from operator import mul

from xdsl.ir import SSAValue

from fusec.dialects.shapes import Shape, numel

Groups = tuple[tuple[int, ...], ...]
"""For each merged axis, the run of split axes it covers."""


@dataclass(frozen=True)
class Split:
    """A merged value's split form: `value` (broadcasting, by NumPy rules, to
    `extents`) reshaped to the merged shape is the merged value; merged axis
    `i` is the split axes `groups[i]`."""

    value: SSAValue
    extents: Shape
    groups: Groups

    def merged(self) -> bool:
        """Whether some merged axis covers more than one split axis."""
        return any(len(g) > 1 for g in self.groups)


def merge_groups(split: Shape, merged: Shape) -> Groups | None:
    """For a reshape of `split` to `merged` that only merges runs of adjacent
    axes, the run of split axes each merged axis covers (None otherwise)."""
    groups: list[tuple[int, ...]] = []
    i = 0
    for m in merged:
        if i == len(split):
            return None
        run, prod = [i], split[i]
        i += 1
        while prod < m and i < len(split):
            run.append(i)
            prod *= split[i]
            i += 1
        if prod != m:
            return None
        groups.append(tuple(run))
    if not groups or any(split[k] != 1 for k in range(i, len(split))):
        return None
    groups[-1] += tuple(range(i, len(split)))
    return tuple(groups)


def split_shape(shape: Shape, groups: Groups, extents: Shape) -> Shape | None:
    """The shape that a value of `shape` (aligned to the merged axes of
    `groups`) takes in the split form of `extents`: its own where
    broadcasting aligns it as it is, None where it differs along a merged
    axis (neither whole nor broadcast)."""
    rank = len(groups)
    if len(shape) > rank:
        return None
    aligned = (1,) * (rank - len(shape)) + shape
    split: list[int] = []
    for g, n in zip(groups, aligned, strict=True):
        whole = [extents[a] for a in g]
        if len(g) > 1 and n not in (1, numel(whole)):
            return None
        split += [1] * len(g) if n == 1 else whole
    if all(len(g) == 1 for g in groups[rank - len(shape):]):
        return shape
    return tuple(split)


def same_split(s: Split, groups: Groups, extents: Shape) -> bool:
    """Whether `s` is split as the trailing axes of `groups`/`extents` are
    (its unmerged axes broadcast as the merged value's do)."""
    own = len(s.groups)
    if own > len(groups):
        return False
    tail = groups[len(groups) - own:]
    first = tail[0][0]
    shifted = tuple(tuple(a - first for a in g) for g in tail)
    return shifted == s.groups and all(
        extents[a] == s.extents[a - first] for g in tail if len(g) > 1 for a in g)


def refine(a: list[int] | None, b: list[int]) -> list[int] | None:
    """The common refinement of two splits of one axis (`a` None: none yet):
    `[1024, 3]` and `[16, 64, 3]` give `[16, 64, 3]`. A split with one axis
    of extent > 1 (a squeeze's `[1, 1024]`) gives way to the other, the
    first one kept between two such; None where neither split's boundaries
    divide the other's (`[2, 3]` and `[3, 2]`)."""
    if a is None or a == b:
        return b
    if sum(n > 1 for n in b) <= 1:
        return a
    if sum(n > 1 for n in a) <= 1:
        return b
    bounds = sorted({*accumulate(a, mul), *accumulate(b, mul)})
    if any(hi % lo for lo, hi in pairwise(bounds)):
        return None
    return [bounds[0], *(hi // lo for lo, hi in pairwise(bounds))]
