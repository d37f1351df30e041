"""Index arithmetic of pointwise kernels: unsigned, 32-bit where it fits,
by compile-time constants, and only over the dimensions an operand varies in.

The iteration shape is already collapsed (`pointwise.collapse_dims`), so
NCHW with a per-channel `[1, C, 1, 1]` operand iterates `[N, C, H*W]`. The
index of a broadcast operand is a sum of one term per *run* of consecutive
dimensions it is full in; a run from `d0` to `d1` contributes

    ((j // inner(d1)) % extent(d0..d1)) * stride(d1)

with no division when `inner(d1)` is 1 and no modulo when the run starts at
dimension 0, so the per-channel operand reads at `(j // (H*W)) % C` and a
row vector of `[R, K]` at `j % K`. Every divisor is a literal: LLVM turns
the division into a multiply-high and a shift, and with 32-bit operands
(every flat index below 2^31) into one `mul.wide.u32`. Signed Python
division would instead cost a 64-bit multiply-high plus the fix-ups that
floor semantics need, and a signed index a wrap-around test per access:
unsigned types remove both.

Terms are named once per element and shared between operands that need the
same coordinate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fusec.codegen.kernel_source import int_literal
from fusec.dialects import shapes


def runs(shape: Sequence[int], iter_shape: Sequence[int], full: bool) -> list[tuple[int, int]]:
    """Maximal runs `(d0, d1)` of consecutive dimensions where `shape` is full
    (`full`) or broadcast (not `full`) against `iter_shape`."""
    out: list[tuple[int, int]] = []
    for d, (s, n) in enumerate(zip(shape, iter_shape, strict=True)):
        if n == 1 or (s == n) != full:
            continue
        if out and out[-1][1] == d - 1:
            out[-1] = (out[-1][0], d)
        else:
            out.append((d, d))
    return out


@dataclass
class ElementIndex:
    """Index expressions of one element (or the first lane of a vector
    access) whose flat index in the iteration shape is the name `flat`.

    `coord_lines` collects the named coordinate terms as they are first
    needed; callers emit them before the loads that use them.
    """

    flat: str
    iter_shape: tuple[int, ...]
    itype: str
    suffix: str
    coord_lines: list[str] = field(default_factory=list)
    _names: dict[tuple[int, int], str] = field(default_factory=dict)

    def lit(self, value: int) -> str:
        """An integer literal in the index type."""
        return f"{self.itype}({int_literal(value)})"

    def run_coord(self, d0: int, d1: int) -> str:
        """The coordinate of run `d0..d1` (row-major within the run), named."""
        inner = shapes.numel(self.iter_shape[d1 + 1:])
        extent = shapes.numel(self.iter_shape[d0:d1 + 1])
        key = (inner, extent if d0 else 0)
        if key in self._names:
            return self._names[key]
        expr = self.flat if inner == 1 else f"{self.itype}({self.flat} // {self.lit(inner)})"
        if d0:
            expr = f"{self.itype}({expr} % {self.lit(extent)})"
        if expr == self.flat:
            return expr
        name = f"c{self.suffix}_{len(self._names)}"
        self._names[key] = name
        self.coord_lines.append(f"{name} = {expr}")
        return name

    def operand(self, shape: Sequence[int]) -> str:
        """Flat index into an operand of collapsed `shape` (same rank, 1 where
        broadcast) at this element."""
        terms: list[str] = []
        for d0, d1 in runs(shape, self.iter_shape, full=True):
            stride = shapes.numel(shape[d1 + 1:])
            c = self.run_coord(d0, d1)
            terms.append(c if stride == 1 else f"{c} * {self.lit(stride)}")
        return " + ".join(terms) if terms else "0"

    def first_along_broadcast(self, shape: Sequence[int]) -> str:
        """The condition that this element is at coordinate 0 of every
        dimension `shape` is broadcast along (who writes a smaller result)."""
        conds = [f"{self.run_coord(d0, d1)} == {self.lit(0)}"
                 for d0, d1 in runs(shape, self.iter_shape, full=False)]
        return " and ".join(conds) if conds else "True"


def merged_coords(at: ElementIndex, runs: Sequence[tuple[int, int] | None]) -> list[str]:
    """The coordinates of `at`'s element, one per dimension, where runs of
    dimensions index as one (`analysis/index_runs.run_coords`): a run's
    row-major coordinate on its last dimension, 0 on the others."""
    return [at.lit(0) if r is None else at.run_coord(*r) for r in runs]
