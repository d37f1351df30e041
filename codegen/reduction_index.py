"""Index arithmetic of reduction kernels (`codegen/reduction.py`): collapsed
axes, unsigned 32-bit indices where they fit, and no division per element.

Collapsing. Neighbouring axes of the reduced shape `X` merge when both are
reduced or both kept and every tensor the kernel reads or writes is full in
both or broadcast in both (`pointwise.dim_groups`, the rule pointwise
kernels collapse by). Channel statistics of NCHW `[64, 128, 56, 56]` over
axes `[0, 2, 3]` become `[64, 128, 3136]` over `[0, 2]`: a row has two
coordinates, not three, and the inner one is contiguous in memory. A softmax
over the last axis of `[B, S, D]` becomes `[B*S, D]`: its index is
`row * D + j`.

Types. Every index is computed in `pointwise_index.index_type` of the
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

from fusec.analysis.group_body import fits_domain
from fusec.analysis.view_operands import READ_IN_PLACE
from fusec.codegen.kernel_source import int_literal, unravel_into
from fusec.codegen.pointwise import dim_groups
from fusec.codegen.pointwise_index import index_type
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import Shape, numel
from fusec.scheduling.reduction_plan import Frame, RowAnalysis


@dataclass(frozen=True)
class RowIndex:
    """The collapsed view of a reduction's shape `X` and how tensors of
    either frame (`X`, or `K`: the kept axes alone) are indexed in it."""

    x_shape: Shape  # X, uncollapsed
    axes: tuple[int, ...]  # reduced axes of X
    groups: tuple[tuple[int, ...], ...]  # axes of X per collapsed dimension
    itype: str  # "uint32" or "uint64"

    @property
    def shape(self) -> Shape:
        """The collapsed shape."""
        return tuple(numel([self.x_shape[d] for d in g]) for g in self.groups)

    @property
    def reduce_dims(self) -> tuple[int, ...]:
        """Collapsed dimensions that are reduced."""
        return tuple(i for i, g in enumerate(self.groups) if g[0] in self.axes)

    @property
    def kept_dims(self) -> tuple[int, ...]:
        """Collapsed dimensions that are kept."""
        return tuple(i for i, g in enumerate(self.groups) if g[0] not in self.axes)

    @property
    def reduce_shape(self) -> Shape:
        return tuple(self.shape[i] for i in self.reduce_dims)

    @property
    def kept_shape(self) -> Shape:
        return tuple(self.shape[i] for i in self.kept_dims)

    def lit(self, value: int) -> str:
        """An integer literal in the index type."""
        return f"{self.itype}({int_literal(value)})"

    def padded(self, shape: Shape, frame: Frame) -> Shape:
        """`shape` (right-aligned to X, or in frame K to X's kept axes) at
        the rank of X, 1 where it has no axis."""
        rank = len(self.x_shape)
        if frame == "X":
            return (1,) * (rank - len(shape)) + tuple(shape)
        kept = [d for d in range(rank) if d not in self.axes]
        at = dict(zip(kept[len(kept) - len(shape):], shape, strict=True))
        return tuple(at.get(d, 1) for d in range(rank))

    def collapsed(self, shape: Shape, frame: Frame) -> Shape:
        """`shape`, seen in `frame`, over the collapsed dimensions."""
        p = self.padded(shape, frame)
        return tuple(numel([p[d] for d in g]) for g in self.groups)

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


def plan_index(ra: RowAnalysis) -> RowIndex:
    """The collapsed indexing of `ra`'s group: axes merge only where every
    input and output (in the frames they are read and written in) and the
    reduced/kept split agree (see the module docstring)."""
    rank = len(ra.shape)
    probe = RowIndex(ra.shape, ra.axes, tuple((d,) for d in range(rank)), "uint64")
    padded: list[Shape] = [tuple(1 if d in ra.axes else n for d, n in enumerate(ra.shape))]
    body = ra.body
    for arg in body.args:
        shape = tensor_shape(arg)
        if fits_domain(shape, ra.shape):
            padded.append(probe.padded(shape, "X"))
        if fits_domain(shape, ra.kept_shape):
            padded.append(probe.padded(shape, "K"))
    for v in body.outputs:
        padded.append(probe.padded(tensor_shape(v), ra.frame.get(v, "X")))
    groups = tuple(tuple(g) for g in dim_groups(ra.shape, padded))
    if any(isinstance(op, READ_IN_PLACE) for op in body.ops):
        # a concat, gather or view is read at every coordinate of its own shape
        groups = tuple((d,) for d in range(rank) if ra.shape[d] != 1)
    return RowIndex(ra.shape, ra.axes, groups, index_type(numel(ra.shape)))
