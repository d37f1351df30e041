"""The vector width of the flat schedule of a pointwise group that reads
operands through layout ops (`scheduling/transposed_plan.py`, `tile = 0`):
how many consecutive elements of the innermost axis one thread takes per
access, and which arrays it then loads and stores wide.

A data-movement kernel (a permutation that keeps the innermost axis, a
reshape-transpose chain, a crop, a gather of rows) reads and writes one
element per thread and access: 2 bytes for f16/bf16, 4 for f32, where the
copy floor wants 8 to 16. With `lanes = V`, a thread takes V consecutive
elements along the innermost axis per access and moves them with one 16-byte
f32 access (`V = 4`) or one 16-, 8- or 4-byte half access (`V = 8`, `V = 4`,
`V = 2`; `codegen/wide_access.py`).

A read is *wide* when lane `j`'s element is lane 0's plus `j` and lane 0's
index is a multiple of V for every access: the read's stride along the
innermost axis is 1 (for an index map, that of the innermost part of the
innermost dimension, whose size V divides), its offset and every other
stride are multiples of V, and V divides the innermost extent (lane 0's
coordinate is then a multiple of V and no lane carries into the next row).
A read that does not vary along the innermost axis (a broadcast operand, a
gather's index) is *uniform*: every lane reads the same element. Any other
read is *scalar*, and the width is chosen only where it pays: every read
wide or uniform, every result stored wide. The base pointers' alignment is
tested in the kernel (the per-lane path runs otherwise): the runtime
allocates 256-byte aligned buffers, arrays passed by a caller may not be.

Odd and prime innermost extents (37, 499, 5089), a crop whose start is not
a multiple of V, a stride-2 slice of the innermost axis and a gather along
it keep one element per access, except a gather whose table rows are staged
in shared memory (`scheduling/staged_gather.py`): its reads are not
memory's, and the results may still be stored wide. A concat's segments choose their own
width (`scheduling/segment_vector.py`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue

from fusec.analysis.concat_operands import concat_pieces
from fusec.analysis.group_body import GroupBody, dtype_name
from fusec.analysis.strided_view import StridedView
from fusec.analysis.view_map import ViewMap
from fusec.analysis.view_operands import (
    READ_IN_PLACE,
    computed_ops,
    computed_root,
    operand_map,
    operand_view,
    read_directly,
)
from fusec.dialects import nn
from fusec.dialects.element_types import BY_DEVICE_DTYPE
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import Shape, numel

if TYPE_CHECKING:  # the plan holds the width: imported for types only
    from fusec.scheduling.transposed_plan import TransposedPlan

WIDE_LANES = {4: (4,), 2: (8, 4, 2)}
"""Lanes per wide access of a float element of this many bytes, widest
first: the words the prelude's wide helpers move (16 bytes of f32; 16, 8 or
4 bytes of halves). Other types stay scalar."""


def lane_choices(dtype: str) -> tuple[int, ...]:
    """Lanes per wide access of an array of device dtype `dtype` (bf16 is
    stored as uint16 bits: `dialects/element_types.py`), widest first; ()
    for a type that moves one element per access."""
    row = BY_DEVICE_DTYPE.get(dtype)
    return WIDE_LANES.get(row.width, ()) if row is not None and row.is_float else ()


class LaneRead(Enum):
    """How the lanes of one access read an array."""

    WIDE = "wide"  # lane j at lane 0's index + j, lane 0's index a multiple of the width
    UNIFORM = "uniform"  # every lane the same element
    SCALAR = "scalar"  # neither: one load per lane


@dataclass(frozen=True)
class FlatVector:
    """`lanes` consecutive elements per access; the group inputs (by
    operand number) and results (by number) accessed wide."""

    lanes: int = 1
    inputs: frozenset[int] = frozenset()
    outputs: frozenset[int] = frozenset()

    def nbytes(self, dtype: str) -> int:
        """Bytes of one wide access of device dtype `dtype`."""
        return self.lanes * (4 if dtype == "float32" else 2)


SCALAR_ACCESS = FlatVector()


def innermost_axis(shape: Shape) -> int | None:
    """The last axis of `shape` longer than 1 (the lanes step along it)."""
    return next((d for d in range(len(shape) - 1, -1, -1) if shape[d] != 1), None)


def view_read(view: StridedView | ViewMap, shape: Shape, axis: int, lanes: int) -> LaneRead:
    """How `view` (right-aligned against iteration `shape`) is read by the
    lanes stepping along `axis`."""
    p = axis - (len(shape) - len(view.shape))
    if p < 0 or view.shape[p] == 1:
        return LaneRead.UNIFORM
    if isinstance(view, ViewMap):
        k = sum(len(view.parts[d]) for d in range(p + 1)) - 1
        fine = view.fine
        if fine.shape[k] % lanes:
            return LaneRead.SCALAR
    else:
        k, fine = p, view
    return _strided_read(fine, k, lanes)


def _strided_read(view: StridedView, k: int, lanes: int) -> LaneRead:
    """Wide when dimension `k` of `view` is contiguous and the offset and
    every other stride keep lane 0 at a multiple of `lanes`."""
    others = [s for d, (n, s) in enumerate(zip(view.shape, view.strides, strict=True))
              if n != 1 and d != k]
    if view.strides[k] == 1 and view.offset % lanes == 0 and all(s % lanes == 0 for s in others):
        return LaneRead.WIDE
    return LaneRead.SCALAR


def whole_read(arg_shape: Shape, shape: Shape, axis: int) -> LaneRead:
    """A contiguous operand of `arg_shape` broadcast (right-aligned) to `shape`."""
    p = axis - (len(shape) - len(arg_shape))
    return LaneRead.UNIFORM if p < 0 or arg_shape[p] == 1 else LaneRead.WIDE


def _root_args(root: SSAValue, inside: set[Operation]) -> Iterator[BlockArgument]:
    """The group inputs the computed ops evaluating `root` load."""
    seen: set[SSAValue] = set()
    stack = [root]
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if isinstance(v, BlockArgument):
            yield v
        elif isinstance(v, OpResult) and v.op in inside and not isinstance(v.op, nn.ConstantOp):
            stack.extend(v.op.operands)


def root_reads(root: SSAValue, view: StridedView | ViewMap, shape: Shape, axis: int,
               lanes: int, inside: set[Operation]) -> list[tuple[BlockArgument, LaneRead]]:
    """How a read through `view` of `root` (a group input, or a value the
    kernel computes where the view reads it) reaches the group's inputs."""
    kind = view_read(view, shape, axis, lanes)
    if isinstance(root, BlockArgument):
        return [(root, kind)]
    assert isinstance(root, OpResult)
    return computed_reads(root, kind, inside, lanes)


def computed_reads(root: OpResult, kind: LaneRead, inside: set[Operation], lanes: int
                    ) -> Iterator[tuple[BlockArgument, LaneRead]]:
    """The reads of a computed root read through a view of lane kind `kind`:
    its operands of the root's shape at the view's index, broadcast ones at
    the coordinates that index unravels to (`codegen/computed_root.py`)."""
    rshape = tensor_shape(root)
    last = innermost_axis(rshape)
    for arg in _root_args(root, inside):
        ashape = tensor_shape(arg)
        if tuple(ashape) == tuple(rshape):
            yield arg, kind
        elif kind is LaneRead.UNIFORM or numel(ashape) == 1:
            yield arg, LaneRead.UNIFORM
        elif (kind is LaneRead.WIDE and last is not None and rshape[last] % lanes == 0
              and whole_read(ashape, rshape, last) is LaneRead.UNIFORM):
            yield arg, LaneRead.UNIFORM  # lanes differ only along the root's innermost axis
        else:
            yield arg, LaneRead.SCALAR


def _gather_reads(op: nn.GatherOp, shape: Shape, axis: int, lanes: int, inside: set[Operation]
                  ) -> list[tuple[BlockArgument, LaneRead]] | None:
    """The index and table reads of `op` read at the iteration point (None:
    an operand this module does not follow: a computed one)."""
    table, indices = op.operands
    found = [_memory_view(table, inside), _memory_view(indices, inside)]
    if found[0] is None or found[1] is None:
        return None
    (troot, tview), (iroot, _) = found[0], found[1]
    rshape = tensor_shape(op.results[0])
    rank = len(tensor_shape(indices))
    p = axis - (len(shape) - len(rshape))
    if p < 0 or rshape[p] == 1:
        return [(troot, LaneRead.UNIFORM), (iroot, LaneRead.UNIFORM)]
    if op.axis <= p < op.axis + rank:  # a gather along the lanes' axis
        return [(troot, LaneRead.SCALAR), (iroot, LaneRead.SCALAR)]
    q = p if p < op.axis else p - rank + 1
    # the table at (row, lane coordinate): the row is the same for every lane
    return [(troot, _strided_read(tview, q, lanes)), (iroot, LaneRead.UNIFORM)]


def _memory_view(v: SSAValue, inside: set[Operation]
                 ) -> tuple[BlockArgument, StridedView] | None:
    """A gather operand as a strided view of a group input, else None."""
    if isinstance(v, BlockArgument):
        return v, StridedView.contiguous(tensor_shape(v))
    assert isinstance(v, OpResult)
    found = operand_view(v.op, inside)
    if isinstance(found, str) or not isinstance(found[0], BlockArgument):
        return None
    return found[0], found[1]


def point_reads(plan: TransposedPlan, axis: int, lanes: int, pinned: nn.ConcatOp | None = None
                ) -> list[tuple[BlockArgument, LaneRead]] | None:
    """Every read the flat kernel (`pointwise_transpose._element_values`)
    makes at the iteration point and how the lanes make it; None where one
    is not followed here. `pinned`: the concat a segment of the grid reads
    one operand of (`scheduling/segment_vector.py` follows that read); it
    and the ops evaluated only under a concat's select are left out."""
    body, shape = plan.body, plan.shape
    inside = set(body.ops)
    skip = concat_pieces(body.ops) | ({pinned} if pinned is not None else set())
    if plan.staged is not None:
        # its table is read from shared memory, its ids one load per lane
        # (consecutive: a warp's lanes cover whole sectors between them)
        skip.add(plan.staged.op)
    reads: list[tuple[BlockArgument, LaneRead]] = []
    for op in body.ops:
        if not isinstance(op, READ_IN_PLACE) or not read_directly(body, op) or op in skip:
            continue
        if isinstance(op, nn.GatherOp):
            found = _gather_reads(op, shape, axis, lanes, inside)
            if found is None:
                return None
            reads += found
            continue
        mapped = operand_map(op, inside)
        if isinstance(mapped, str):
            return None
        reads += root_reads(*mapped, shape, axis, lanes, inside)
    for arg in body.args:
        if any(not isinstance(u.operation, READ_IN_PLACE) and not computed_root(
                u.operation, inside) and u.operation not in skip for u in arg.uses):
            reads.append((arg, whole_read(tensor_shape(arg), shape, axis)))
    return reads


def wide_inputs(body: GroupBody, reads: list[tuple[BlockArgument, LaneRead]], lanes: int
                ) -> frozenset[int] | None:
    """The group inputs (by number) `reads` load wide, when every input is
    read only wide or only uniform and each wide one has an access of
    `lanes` elements (`lane_choices`); else None."""
    kinds: dict[BlockArgument, set[LaneRead]] = {}
    for arg, kind in reads:
        kinds.setdefault(arg, set()).add(kind)
    wide = {arg for arg, ks in kinds.items() if ks == {LaneRead.WIDE}}
    if any(ks not in ({LaneRead.WIDE}, {LaneRead.UNIFORM}) for ks in kinds.values()) or any(
            lanes not in lane_choices(dtype_name(arg)) for arg in wide):
        return None
    return frozenset(body.arg_index(a) for a in wide)


def result_dtype(body: GroupBody, shape: Shape) -> str | None:
    """The device dtype of every result when all have iteration `shape`, one
    dtype, and none is a computed root (evaluated by a view only); else None."""
    computed = computed_ops(set(body.ops))
    if any(v.op in computed for v in body.outputs if isinstance(v, OpResult)):
        return None
    out_dtypes = {dtype_name(v) for v in body.outputs}
    if len(out_dtypes) != 1 or any(tuple(tensor_shape(v)) != tuple(shape) for v in body.outputs):
        return None
    return next(iter(out_dtypes))


def flat_vector(plan: TransposedPlan) -> FlatVector:
    """The widest access every read and store of the flat kernel of `plan`
    makes wide or uniform (`lane_choices`), else one element per access."""
    body, shape = plan.body, plan.shape
    axis = innermost_axis(shape)
    if plan.axes is not None or axis is None or any(
            isinstance(op, nn.ConcatOp) for op in body.ops):
        return SCALAR_ACCESS
    dtype = result_dtype(body, shape)
    if dtype is None:
        return SCALAR_ACCESS
    for lanes in lane_choices(dtype):
        if shape[axis] % lanes or plan.unroll % lanes:
            continue
        reads = point_reads(plan, axis, lanes)
        if reads is None:
            return SCALAR_ACCESS
        wide = wide_inputs(body, reads, lanes)
        if wide is None:
            continue
        return FlatVector(lanes, wide, frozenset(range(len(body.outputs))))
    return SCALAR_ACCESS
