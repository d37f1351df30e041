"""Collapsing an iteration shape: neighbouring dimensions merge when every
operand treats them alike (full in both or broadcast in both), so a kernel
indexes fewer, longer dimensions. Pointwise kernels collapse by this rule
(`collapse_dims`), and so do row reductions (`dim_groups`,
`scheduling/row_index.py`).
"""

from __future__ import annotations

from collections.abc import Sequence

from fusec.dialects import shapes


def collapse_dims(
    out_shape: Sequence[int], shapes_in: Sequence[Sequence[int]]
) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Merge neighbouring dimensions that every operand treats alike.

    Operands are right-aligned against `out_shape`; dimension d of an operand
    is "full" (size equal to the output's) or "broadcast" (size 1). Output
    dimensions of size 1 are dropped, and two neighbours merge when every
    operand is full in both or broadcast in both, so `[4, 8] + [8]` stays 2-d
    while `[2, 3, 4] + [2, 3, 4]` becomes 1-d. Returns the collapsed output
    shape and each operand's collapsed shape (same rank, 1 where broadcast).
    """
    rank = len(out_shape)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes_in]
    groups = dim_groups(out_shape, padded)
    out = tuple(shapes.numel([out_shape[d] for d in g]) for g in groups)
    operands = [tuple(shapes.numel([p[d] for d in g]) for g in groups) for p in padded]
    return out, operands


def dim_groups(out_shape: Sequence[int], padded: Sequence[Sequence[int]]) -> list[list[int]]:
    """The dimensions of `out_shape` (those of size 1 dropped) in runs that
    every operand of `padded` (same rank) is full in throughout or broadcast
    in throughout: the groups `collapse_dims` merges."""
    groups: list[list[int]] = []
    for d in (d for d in range(len(out_shape)) if out_shape[d] != 1):
        if groups and all((p[groups[-1][-1]] == 1) == (p[d] == 1) for p in padded):
            groups[-1].append(d)
        else:
            groups.append([d])
    return groups
