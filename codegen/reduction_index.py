"""Index arithmetic of reduction kernels (`codegen/reduction.py`): collapsed
axes, unsigned 32-bit indices where they fit, and no division per element.

Collapsing. Neighbouring axes of the reduced shape `X` merge when both are
reduced or both kept and every tensor the kernel reads or writes is full in
both or broadcast in both (`analysis/collapsed_dims.py`, the rule pointwise
kernels collapse by). Channel statistics of NCHW `[64, 128, 56, 56]` over
axes `[0, 2, 3]` become `[64, 128, 3136]` over `[0, 2]`: a row has two
coordinates, not three, and the inner one is contiguous in memory. A softmax
over the last axis of `[B, S, D]` becomes `[B*S, D]`: its index is
`row * D + j`.

Types. Every index is computed in `analysis/index_types.index_type` of the
element count of `X` (every tensor of the kernel fits in it): `uint32`
below 2^31 elements, so a division by a constant is one `mul.hi.u32` and an
index needs no wrap-around test for negative values; `uint64` otherwise.

Strength reduction. A streamed pass visits a lane's elements `lanes` apart.
With one reduced coordinate that coordinate is the element number `j`
itself. With several, the coordinates are digits of `j` in the mixed radix
of the collapsed reduced shape: computed by divisions once, before the
loop, then advanced by the constant `lanes` per element with one add and
one carry test per digit (`advance_lines`), never divided again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fusec.codegen.kernel_source import int_literal, unravel_into
from fusec.dialects.shapes import Shape
from fusec.scheduling.reduction_plan import Frame
from fusec.scheduling.row_index import RowIndexPlan


@dataclass(frozen=True)
class RowIndex(RowIndexPlan):
    """The collapsed indexing of a row reduction (`scheduling/row_index.py`)
    and the index arithmetic kernels write with it."""

    def lit(self, value: int) -> str:
        """An integer literal in the index type."""
        return f"{self.itype}({int_literal(value)})"

    def index(self, shape: Shape, frame: Frame, coords: Sequence[str]) -> str:
        """Flat index into a tensor of `shape` at the point whose collapsed
        coordinates are `coords` (one name per collapsed dimension; only
        those the tensor is full in are read)."""
        c = self.collapsed(shape, frame)
        terms: list[str] = []
        stride = 1
        for i in range(len(c) - 1, -1, -1):
            if c[i] != 1:
                terms.append(coords[i] if stride == 1 else f"{coords[i]} * {self.lit(stride)}")
            stride *= c[i]
        # Summed as numba promotes (uint64 of 32-bit terms): constant parts
        # of an element's index then fold into the address's immediate.
        return " + ".join(reversed(terms)) if terms else self.lit(0)

    def owner_guard(self, shape: Shape, frame: Frame, coords: Sequence[str],
                    dims: Sequence[int]) -> str:
        """The condition that the point is at coordinate 0 of every collapsed
        dimension of `dims` the tensor broadcasts along (who stores it)."""
        c = self.collapsed(shape, frame)
        return " and ".join(f"{coords[i]} == {self.lit(0)}" for i in dims
                            if c[i] == 1 and self.shape[i] != 1)

    def unravel_lines(self, flat: str, shape: Shape, names: Sequence[str]) -> list[str]:
        """Lines setting `names` to the coordinates of `flat` in `shape`
        (divisions by literals in the index type)."""
        return unravel_into(flat, shape, names, [f"{n}_r" for n in names], self.itype)

    def advance_lines(self, names: Sequence[str], step: int) -> list[str]:
        """Lines adding `step` to the mixed-radix number whose digits are
        `names` over the collapsed reduced shape: per digit an add of the
        step's digit and the carry, and one test (the step's digit is below
        the radix, so a digit wraps at most once); the leading digit is
        never wrapped (a lane past the row's end is guarded by its caller)."""
        shape = self.reduce_shape
        digits: list[int] = []
        rest = step
        for n in reversed(shape[1:]):
            digits.append(rest % n)
            rest //= n
        digits.append(rest)
        digits.reverse()
        lines: list[str] = []
        carry = ""
        for d in range(len(shape) - 1, -1, -1):
            add = f" + {self.lit(digits[d])}" if digits[d] else ""
            add += f" + {self.itype}({carry})" if carry else ""
            if not add:
                continue
            lines.append(f"{names[d]} = {self.itype}({names[d]}{add})")
            if d == 0:
                break
            carry = f"wrap{d}"
            lines += [f"{carry} = {names[d]} >= {self.lit(shape[d])}",
                      f"if {carry}:",
                      f"    {names[d]} = {self.itype}({names[d]} - {self.lit(shape[d])})"]
        return lines


def row_index(ix: RowIndexPlan) -> RowIndex:
    """The index plan `ix`, able to write its index arithmetic."""
    return RowIndex(ix.x_shape, ix.axes, ix.groups, ix.itype)
