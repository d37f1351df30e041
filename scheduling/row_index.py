"""The collapsed indexing of a row reduction (`plan_index`): which axes of
the reduced shape `X` merge, and the index type. The row schedule reads it
(quads need one contiguous reduced dimension, `scheduling/row_vector.py`);
`codegen/reduction_index.py` writes the index arithmetic from it (the
module docstring there tells the rule).
"""

from __future__ import annotations

from dataclasses import dataclass

from fusec.analysis.collapsed_dims import dim_groups
from fusec.analysis.group_body import fits_domain
from fusec.analysis.group_memo import planned
from fusec.analysis.index_types import index_type
from fusec.analysis.view_operands import READ_IN_PLACE
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import Shape, numel
from fusec.scheduling.reduction_plan import Frame, RowAnalysis


@dataclass(frozen=True)
class RowIndexPlan:
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


def plan_index(ra: RowAnalysis) -> RowIndexPlan:
    """The collapsed indexing of `ra`'s group: axes merge only where every
    input and output (in the frames they are read and written in) and the
    reduced/kept split agree (`codegen/reduction_index.py` tells the rule).
    Decided once while the group stays as it is (`group_memo`): the row
    schedule's vector width, the plan and the register model ask alike."""
    return planned("row_index", ra.body.group, lambda _group: collapse_index(ra))


def collapse_index(ra: RowAnalysis) -> RowIndexPlan:
    """`plan_index` decided afresh."""
    rank = len(ra.shape)
    probe = RowIndexPlan(ra.shape, ra.axes, tuple((d,) for d in range(rank)), "uint64")
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
    return RowIndexPlan(ra.shape, ra.axes, groups, index_type(numel(ra.shape)))
