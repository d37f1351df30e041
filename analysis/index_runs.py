"""Runs of dimensions a pointwise kernel with views may index as one.

The flat schedule of a kernel that reads slices, transposes or a concat's
operands in place (`codegen/pointwise_transpose.py`) unravels each
element's flat index into one coordinate per dimension and forms every
address as `offset + sum(c[d] * stride[d])`. An unravel costs a division by
a constant per dimension (2 to 5 instructions each), and a half-precision
kernel moves 2 bytes per element: dm05 (a concat of `4631x54x53` and
`4631x35x53` bf16 along axis 1) spent about 48 PTX instructions per element,
far more than the copy floor leaves time for.

Two neighbouring dimensions `d` and `e` (`e` the next one longer than 1)
index as one when every access steps across them alike: its stride along
`d` is its stride along `e` times the extent of `e` (both 0 for an access
broadcast along both). Then `c[d] * s[d] + c[e] * s[e]` is `r * s[e]` for
the run's row-major coordinate `r`, one division instead of two. A segment
of a concat (`scheduling/concat_segments.py`) walks its operand's shape:
the operand is contiguous in `54 x 53` and so is the result at `89 x 53`,
shifted by 54 rows (a constant added), so the segment unravels into
`4631 x 2862` and reads its operand at the flat index itself.

The accesses are every value the kernel reads, followed from its results:
group inputs (contiguous, broadcast right-aligned), chains of layout ops
(their composed strided view; a computed root is evaluated at the view's
flat index, whatever its own shape), and the results' stores. Anything else
that reads a coordinate on its own keeps every dimension apart (None): a
gather, a concat chosen per element, an index map of a reshape that merges
strided dimensions (`analysis/view_map.py`), a result smaller than the
iteration (its store is guarded per coordinate).
"""

from __future__ import annotations

from xdsl.ir import BlockArgument, Operation, SSAValue

from fusec.analysis.group_body import GroupBody
from fusec.analysis.strided_view import StridedView
from fusec.analysis.view_map import ViewMap
from fusec.analysis.view_operands import CHAINED_VIEWS, INDEXED_READS, operand_map
from fusec.dialects import nn
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import Shape

Runs = tuple[tuple[int, ...], ...]
"""Dimensions (those longer than 1) in runs indexed as one, outermost first."""


def _aligned(view: StridedView, rank: int) -> tuple[int, ...]:
    """`view`'s strides right-aligned against `rank` dimensions (0 where
    it is broadcast or absent)."""
    lead = (0,) * (rank - len(view.shape))
    return lead + tuple(s if n != 1 else 0 for n, s in zip(view.shape, view.strides,
                                                           strict=True))


def _accesses(body: GroupBody, rank: int, result: Shape,
              pinned: tuple[nn.ConcatOp, int] | None) -> list[tuple[int, ...]] | None:
    """The strides of every access the kernel makes (`rank` dimensions), or
    None where one is not linear in the coordinates."""
    if any(tuple(tensor_shape(v)) != tuple(result) for v in body.outputs):
        return None
    inside = set(body.ops)
    found = [_aligned(StridedView.contiguous(result), rank)]
    seen: set[SSAValue] = set()
    stack = list(body.outputs)
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if isinstance(v, BlockArgument):
            found.append(_aligned(StridedView.contiguous(tensor_shape(v)), rank))
            continue
        op = v.owner
        assert isinstance(op, Operation)
        if op not in inside or isinstance(op, nn.ConstantOp):
            continue
        if pinned is not None and op is pinned[0]:
            stack.append(op.operands[pinned[1]])  # read at the operand's own coordinates
        elif isinstance(op, INDEXED_READS):
            return None
        elif isinstance(op, CHAINED_VIEWS):
            mapped = operand_map(op, inside)
            if isinstance(mapped, str) or isinstance(mapped[1], ViewMap):
                return None
            found.append(_aligned(mapped[1], rank))
        else:
            stack.extend(op.operands)
    return found


def index_runs(body: GroupBody, shape: Shape,
               pinned: tuple[nn.ConcatOp, int] | None = None) -> Runs | None:
    """The runs of `shape`'s dimensions the kernel of `body` may index as
    one (the module docstring): `shape` is the iteration's, or with `pinned`
    (a concat and an operand number) the segment's walk over that operand,
    its results stored at the concat's coordinates. None: every dimension
    apart."""
    result = shape if pinned is None else tuple(tensor_shape(pinned[0].results[0]))
    accesses = _accesses(body, len(shape), result, pinned)
    if accesses is None:
        return None
    runs: list[list[int]] = []
    for e in (d for d in range(len(shape)) if shape[d] != 1):
        if runs and all(s[runs[-1][-1]] == s[e] * shape[e] for s in accesses):
            runs[-1].append(e)
        else:
            runs.append([e])
    return tuple(tuple(r) for r in runs)


def row_runs(body: GroupBody, concat: nn.ConcatOp) -> Runs:
    """The runs of the dimensions before `concat`'s axis (its innermost) for
    a kernel that takes one whole row of the result per access and reads
    every operand in it (`scheduling/concat_rows.py`): those `index_runs`
    gives the walk over each operand, kept where all agree (else each
    dimension alone); the axis itself is no run's (its coordinate is the
    lane's)."""
    axis, shape = concat.axis, tuple(tensor_shape(concat.results[0]))
    dims = [d for d in range(axis) if shape[d] != 1]
    by_operand = [index_runs(body, tuple(tensor_shape(v)), (concat, k))
                  for k, v in enumerate(concat.inputs)]
    if any(r is None for r in by_operand):
        return tuple((d,) for d in dims)
    owner = [{d: i for i, run in enumerate(r) for d in run} for r in by_operand
             if r is not None]
    runs: list[list[int]] = []
    for d in dims:
        if runs and all(o.get(runs[-1][-1]) == o.get(d) for o in owner):
            runs[-1].append(d)
        else:
            runs.append([d])
    return tuple(tuple(r) for r in runs)


def run_coords(shape: Shape, runs: Runs | None) -> list[tuple[int, int] | None]:
    """Per dimension of `shape`, the run `(first, last)` whose coordinate it
    carries (the run's last dimension does), or None (coordinate 0: a size-1
    dimension, or an outer dimension of a run). `runs` None: each dimension
    longer than 1 alone."""
    out: list[tuple[int, int] | None] = [None] * len(shape)
    alone = tuple((d,) for d in range(len(shape)) if shape[d] != 1)
    for run in runs if runs is not None else alone:
        out[run[-1]] = (run[0], run[-1])
    return out
