"""The widths of the transposed tile's global accesses
(`codegen/pointwise_tile.py`): how many consecutive elements a thread moves
per load while staging the transposed operands, and per store of the
results.

The tile's two phases each walk a side that is contiguous in memory: the
staging loads walk the swapped side (the staged operands' innermost axis),
the stores walk the innermost side (the results'). One element per thread
and access moves 4 bytes of f32 or 2 of a half, where the copy floor wants
8 to 16. With `V` lanes on a side, a tile row of `T` elements is `T / V`
threads, each moving `V` consecutive elements in one word
(`codegen/wide_access.py`), and a pass covers `block * V / T` rows. The
shared tile keeps its pad: a warp's `V` words land on rows `r` and columns
`V * q + k`, banks `r + V * q + k` apart, all distinct.

A side is wide with `V` lanes (`lane_choices` of the element type, widest
first, `flat_vector.py`) when:

- every array it moves steps 1 along the side (the innermost axis of the
  side's merged group), its offset and its other strides are multiples of
  `V` (lane 0's index is a multiple of `V`, so the word is aligned when the
  array is), and `V` divides the side's extent (the innermost group's, for
  a side that spans two: no word crosses into the next group). A swapped
  side that spans two groups (`swapped_side`) which every staged operand
  steps across as across one axis is one axis to the loads: `V` divides
  both groups' extent together and the outer group's stride need not be a
  multiple of `V` (dm06's `36 x 1291`, odd inside, is 46476 together);
- the staged operand is a group input, or is evaluated from inputs each read
  wide (at the operand's own index) or the same for every lane
  (`flat_vector.computed_reads`); every result is stored wide, none
  broadcast along an axis;
- `V` divides the tile and `block * V / T` rows divide `T` (a 32-wide tile
  of 256 threads takes at most 4 lanes, the halves' tile of 128 threads 8:
  16-byte words).

The kernel tests every wide array's alignment once and takes the scalar
tile otherwise. The side whose extent is odd (37) keeps one element per
access; the other side may still be wide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xdsl.ir import BlockArgument, OpResult

from fusec.analysis.group_body import dtype_name
from fusec.dialects.shapes import numel
from fusec.scheduling.flat_vector import LaneRead, computed_reads, lane_choices, wide_inputs

if TYPE_CHECKING:  # the plan holds the widths: imported for types only
    from fusec.scheduling.transposed_plan import LinearAccess, TransposedPlan


@dataclass(frozen=True)
class TileVector:
    """Elements per global access of the staging loads (`load`) and of the
    stores (`store`); the group inputs (by number) loaded wide and whether
    the results are stored wide."""

    load: int = 1
    store: int = 1
    inputs: frozenset[int] = frozenset()

    @property
    def wide(self) -> bool:
        """Whether some side moves several elements per access."""
        return self.load > 1 or self.store > 1


SCALAR_TILE = TileVector()


def _aligned_steps(acc: LinearAccess, groups: Sequence[tuple[int, ...]], side: int,
                   lanes: int, outer: int | None = None) -> bool:
    """Whether `acc` steps 1 along group `side` and keeps lane 0 at a
    multiple of `lanes` (offset and every other group's stride but that of
    `outer`, a group the side spans as one axis with it)."""
    return acc.stride(groups[side]) == 1 and acc.offset % lanes == 0 and all(
        acc.stride(g) % lanes == 0 for k, g in enumerate(groups) if k not in (side, outer))


def _spans_as_one(plan: TransposedPlan, groups: Sequence[tuple[int, ...]], a: int,
                  staged: Sequence[tuple[BlockArgument | OpResult, LinearAccess]]) -> bool:
    """Whether the swapped side spans an outer group (`swapped_outer`) that
    every staged operand steps across as across one axis with group `a`
    (the kernel then indexes them by the side's one coordinate)."""
    k = plan.swapped_outer
    ext_a = numel(tuple(plan.shape[d] for d in groups[a]))
    return k is not None and all(acc.stride(groups[k]) == ext_a * acc.stride(groups[a])
                                 for _, acc in staged)


def _fits(plan: TransposedPlan, lanes: int) -> bool:
    """`lanes` divides the tile and a pass's rows divide it."""
    rows = plan.threads * lanes // plan.tile
    return plan.tile % lanes == 0 and rows <= plan.tile and plan.tile % rows == 0


def _load_lanes(plan: TransposedPlan, groups: Sequence[tuple[int, ...]], a: int,
                staged: Sequence[tuple[BlockArgument | OpResult, LinearAccess]]
                ) -> tuple[int, frozenset[int]]:
    """The staging loads' lanes and the inputs they read wide."""
    outer = plan.swapped_outer if _spans_as_one(plan, groups, a, staged) else None
    ext = numel(tuple(plan.shape[d] for k in (outer, a) if k is not None for d in groups[k]))
    inside = set(plan.body.ops)
    dtypes = {dtype_name(root) for root, _ in staged}
    if len(dtypes) != 1:
        return 1, frozenset()
    for lanes in lane_choices(next(iter(dtypes))):
        if ext % lanes or not _fits(plan, lanes) or not all(
                _aligned_steps(acc, groups, a, lanes, outer) for _, acc in staged):
            continue
        wide: set[int] = set()
        for root, _ in staged:
            reads = [(root, LaneRead.WIDE)] if isinstance(root, BlockArgument) else list(
                computed_reads(root, LaneRead.WIDE, inside, lanes))
            found = wide_inputs(plan.body, reads, lanes)
            if found is None or not found:
                break
            wide |= found
        else:
            return lanes, frozenset(wide)
    return 1, frozenset()


def _store_lanes(plan: TransposedPlan, groups: Sequence[tuple[int, ...]], i: int,
                 results: Sequence[LinearAccess]) -> int:
    """The stores' lanes: every result wide along the innermost group."""
    ext = numel(tuple(plan.shape[d] for d in groups[i]))
    dtypes = {dtype_name(v) for v in plan.body.outputs}
    if len(dtypes) != 1 or any(acc.stride(g) == 0 for acc in results for g in groups):
        return 1  # a result broadcast along some axis is stored by one point
    return next((lanes for lanes in lane_choices(next(iter(dtypes)))
                 if ext % lanes == 0 and _fits(plan, lanes)
                 and all(_aligned_steps(acc, groups, i, lanes) for acc in results)), 1)


def tile_vector(plan: TransposedPlan, groups: Sequence[tuple[int, ...]], a: int, i: int,
                staged: Sequence[tuple[BlockArgument | OpResult, LinearAccess]],
                results: Sequence[LinearAccess]) -> TileVector:
    """The widest loads and stores of the tiled kernel of `plan` (merged axis
    `groups`, the swapped one `a`, the innermost one `i`; each staged
    operand's root and access, each result's access) the module docstring
    allows."""
    load, inputs = _load_lanes(plan, groups, a, staged)
    return TileVector(load, _store_lanes(plan, groups, i, results), inputs)
