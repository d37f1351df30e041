"""The `sink-transposes` pass: a transpose of an elementwise op's result
becomes the elementwise op of transposed operands.

Elementwise ops commute with a permutation of their axes, so
`transpose(relu(x + y))` is `relu(transpose(x) + transpose(y))`, exactly
(the same operations on the same values). The first form is two kernels:
the elementwise group writes its result, and a copy transposes it. The
second is one: a pointwise group reads its transposed operands through a
shared-memory tile, coalesced on both sides (`fold_views`, docs/fusion.md),
and writes its result in place. The rewrite repeats up a chain while each
op's only reader is the transpose, so the transposes end on values read
from memory (inputs, or results of reductions, matmuls and windows).

```mlir
// before
%a = nn.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
%t = nn.transpose %a {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
// after `fusec -p sink-transposes`
%x_t = nn.transpose %x {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
%b_t = nn.reshape %b : (tensor<8xf32>) -> tensor<8x1xf32>
%t = nn.add %x_t, %b_t : (tensor<8x4xf32>, tensor<8x1xf32>) -> tensor<8x4xf32>
```

An operand of lower rank (a broadcast bias) is aligned to the result's rank
with leading ones, as broadcasting aligns it; where the permutation keeps
the order of its dimensions larger than one, the transposed operand is just
a reshape (a bias `[8]` of a `[4, 8]` result becomes `[8, 1]`). Any
transpose that keeps its elements' order that way is a reshape, or nothing
where the shape does not change (`perm = [0, 1]`). Only an op
whose single reader is the transpose moves (otherwise its result is still
needed as it is, and the op would be computed twice); `nn.batch_norm`, whose
channel axis is an attribute, stays.

Two reshapes move the same way, for the kernels of interleaves
(`concat` of `[..., n, 1]` pieces along a new last axis, merged to
`[..., 2n]`):

- a reshape that only inserts or removes extents of 1 and is read by
  concats moves above the elementwise ops it reads, as a transpose does
  (`sink_unit_reshape`), so a piece `reshape(x + 1)` becomes
  `reshape(x) + 1`, a view of an input inside the kernel that computes the
  concat (elsewhere such a reshape stays: a reduction's epilogue, say
  logsumexp's `log(s) + m` before a squeeze, reads the reduction's keepdims
  result, not a reshape of it);
- an elementwise op reading a reshape that regroups dimensions (merges or
  splits them) of a value computed from a concat by elementwise ops moves
  above that reshape (`lift_regrouping_reshape`): `reshape(c) + b` becomes
  `reshape(c + b')`, each other operand broadcast over the concat's shape as
  it was over the reshape's (`b` of `[rows, 1]` becomes `[rows, 1, 1]`, one
  of `[2n]` becomes `[1, n, 2]`); where an operand is full along some but
  not all dimensions a merged one came from, the op stays. The concat's
  kernel computes the op, and the reshape is a view of its result.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Attribute, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.analysis.rewriting import copy_location
from fusec.dialects import nn
from fusec.dialects.nn_base import int_list, tensor_shape


def _tensor(like: SSAValue, shape: tuple[int, ...]) -> TensorType[Attribute]:
    t = like.type
    assert isinstance(t, TensorType)
    return TensorType(t.element_type, shape)


def _movable(op: Operation, transpose: nn.TransposeOp | nn.ReshapeOp) -> bool:
    """Whether the elementwise `op` may take `transpose`'s (or a unit
    reshape's) place: its one result read by that view alone."""
    return (op_kind(op) is OpKind.ELEMENTWISE
            and not isinstance(op, nn.BatchNormOp) and len(op.results) == 1
            and [u.operation for u in op.results[0].uses] == [transpose])


def transposed_operand(rewriter: Rewriter, value: SSAValue, rank: int, perm: list[int],
                at: Operation) -> SSAValue:
    """`value`, aligned to `rank` by leading ones, transposed by `perm`
    (new ops inserted before `at`, located as it); a value of one element
    (a scalar) broadcasts as it is."""
    shape = tensor_shape(value)
    if all(d == 1 for d in shape):
        return value
    new: list[Operation] = []
    shape = (1,) * (rank - len(shape)) + shape
    permuted = tuple(shape[p] for p in perm)
    if keeps_order(shape, perm):  # a reshape is the transpose
        new.append(nn.ReshapeOp.create(operands=[value], result_types=[_tensor(value, permuted)]))
    else:
        if tensor_shape(value) != shape:
            new.append(nn.ReshapeOp.create(operands=[value],
                                           result_types=[_tensor(value, shape)]))
            value = new[-1].results[0]
        new.append(nn.TransposeOp.create(
            operands=[value], result_types=[_tensor(value, permuted)],
            attributes={"perm": int_list(perm)}))
    copy_location(at, *new)
    rewriter.insert_op(new, InsertPoint.before(at))
    return new[-1].results[0]


def sink_one(rewriter: Rewriter, transpose: nn.TransposeOp) -> list[nn.TransposeOp]:
    """Rewrite `transpose(op(...))` as `op(transpose(...))` when `op` is
    movable (one transpose or reshape per operand, before `op`); the new
    transposes, which may move further up (none when nothing moved)."""
    src = transpose.operands[0]
    op = src.op if isinstance(src, OpResult) else None
    if op is None or not _movable(op, transpose):
        return []
    perm, rank = transpose.perm, len(tensor_shape(src))
    operands = [transposed_operand(rewriter, v, rank, perm, op) for v in op.operands]
    result = transpose.results[0]
    moved = type(op).create(operands=operands, result_types=[result.type],
                            attributes=dict(op.attributes), properties=dict(op.properties))
    moved.results[0].name_hint = result.name_hint or src.name_hint
    copy_location(op, moved)
    rewriter.replace_op(transpose, moved)
    rewriter.erase_op(op)
    return [o for o in (v.owner for v in operands) if isinstance(o, nn.TransposeOp)]


def keeps_order(shape: tuple[int, ...], perm: list[int]) -> bool:
    """Whether permuting `shape` by `perm` moves only axes of extent 1, so
    the elements keep their row-major order (the transpose is a reshape)."""
    moved = [p for p in perm if shape[p] != 1]
    return moved == sorted(moved)


def as_reshape(rewriter: Rewriter, transpose: nn.TransposeOp) -> bool:
    """Replace a transpose that keeps its elements' order by its operand (same
    shape) or a reshape (a strided read or a copy either way otherwise);
    whether it did."""
    src = transpose.operands[0]
    if not keeps_order(tensor_shape(src), transpose.perm):
        return False
    result = transpose.results[0]
    if result.type == src.type:
        result.replace_all_uses_with(src)
        rewriter.erase_op(transpose)
        return True
    reshape = nn.ReshapeOp.create(operands=[src], result_types=[result.type])
    reshape.results[0].name_hint = result.name_hint
    copy_location(transpose, reshape)
    rewriter.replace_op(transpose, reshape)
    return True


def only_unit_dims(src: tuple[int, ...], dst: tuple[int, ...]) -> bool:
    """Whether reshaping `src` to `dst` only inserts or removes extents of 1
    (the extents larger than one are the same, in the same order)."""
    return src != dst and [d for d in src if d != 1] == [d for d in dst if d != 1]


def _unit_reshaped(rewriter: Rewriter, value: SSAValue, src: tuple[int, ...],
                   dst: tuple[int, ...], at: Operation) -> SSAValue:
    """`value` (broadcast to `src`) as an operand broadcast to `dst` alike,
    where `src` and `dst` differ only in extents of 1 (`only_unit_dims`):
    each of its extents along a dimension larger than one moves with that
    dimension, the others are 1 (a new reshape before `at`)."""
    shape = tensor_shape(value)
    if all(d == 1 for d in shape) and len(shape) <= len(dst):
        return value  # broadcasts as it is
    aligned = (1,) * (len(src) - len(shape)) + shape
    kept = iter(e for e, d in zip(aligned, src, strict=True) if d != 1)
    target = tuple(next(kept) if d != 1 else 1 for d in dst)
    if target == shape:
        return value
    reshape = nn.ReshapeOp.create(operands=[value], result_types=[_tensor(value, target)])
    copy_location(at, reshape)
    rewriter.insert_op(reshape, InsertPoint.before(at))
    return reshape.results[0]


def sink_unit_reshape(rewriter: Rewriter, reshape: nn.ReshapeOp) -> list[nn.ReshapeOp]:
    """Rewrite `reshape(op(...))`, a reshape that only inserts or removes
    extents of 1, as `op(reshape(...))` when `op` is elementwise and the
    reshape is its only reader; the new reshapes, which may move further up
    (none when nothing moved)."""
    src = reshape.operands[0]
    op = src.op if isinstance(src, OpResult) else None
    shape, result = tensor_shape(src), reshape.results[0]
    if (op is None or not only_unit_dims(shape, tensor_shape(result))
            or not _movable(op, reshape)):
        return []
    operands = [_unit_reshaped(rewriter, v, shape, tensor_shape(result), op)
                for v in op.operands]
    moved = type(op).create(operands=operands, result_types=[result.type],
                            attributes=dict(op.attributes), properties=dict(op.properties))
    moved.results[0].name_hint = result.name_hint or src.name_hint
    copy_location(op, moved)
    rewriter.replace_op(reshape, moved)
    rewriter.erase_op(op)
    return [o for o in (v.owner for v in operands) if isinstance(o, nn.ReshapeOp)]


def dim_groups(a: tuple[int, ...], b: tuple[int, ...]
               ) -> list[tuple[range, range]] | None:
    """The dimensions of `a` and of `b` (same element count) in consecutive
    groups of equal extent products, as a reshape from one to the other
    regroups them; None where they do not line up (a product passed over)."""
    groups: list[tuple[range, range]] = []
    i = j = 0
    while i < len(a) or j < len(b):
        si, sj, pa, pb = i, j, 1, 1
        if i < len(a):
            pa, i = a[i], i + 1
        if j < len(b):
            pb, j = b[j], j + 1
        while pa != pb:
            if pa < pb and i < len(a):
                pa, i = pa * a[i], i + 1
            elif pb < pa and j < len(b):
                pb, j = pb * b[j], j + 1
            else:
                return None
        groups.append((range(si, i), range(sj, j)))
    return groups


def _regrouped(value: SSAValue, src: tuple[int, ...], dst: tuple[int, ...],
               groups: list[tuple[range, range]]) -> tuple[int, ...] | None:
    """The shape `value` (broadcast to `dst`) takes broadcast to `src` alike,
    `groups` pairing `src`'s dimensions with `dst`'s: within a group it must
    be full or broadcast along all of them; None otherwise."""
    shape = tensor_shape(value)
    aligned = (1,) * (len(dst) - len(shape)) + shape
    out = [1] * len(src)
    for ga, gb in groups:
        ext = [aligned[d] for d in gb]
        if all(e == 1 for e in ext):
            continue
        if ext != [dst[d] for d in gb]:
            return None
        for d in ga:
            out[d] = src[d]
    return tuple(out)


def _from_concat(v: SSAValue) -> bool:
    """Whether `v` is a concat's result, or an elementwise op's over one
    whose only reader is the op using `v` (the chain a pointwise kernel
    computing the concat evaluates)."""
    op = v.op if isinstance(v, OpResult) else None
    if isinstance(op, nn.ConcatOp):
        return True
    return (op is not None and op_kind(op) is OpKind.ELEMENTWISE and len(list(v.uses)) == 1
            and any(_from_concat(x) for x in op.operands))


def lift_regrouping_reshape(rewriter: Rewriter, op: Operation) -> bool:
    """Rewrite the elementwise `op(reshape(x), y...)`, where the reshape
    regroups the dimensions of `x` (merges or splits, not only extents of 1)
    and `x` is computed from a concat by elementwise ops (an interleave:
    `concat` of `[..., n, 1]` pieces along the last axis, merged to
    `[..., 2n]`), as `reshape(op(x, y'...))`, each other operand `y'` broadcast
    over `x`'s shape as `y` is over the reshape's; whether it did. The kernel
    computing the concat then computes `op` too, and the reshape is a view of
    its result."""
    if op_kind(op) is not OpKind.ELEMENTWISE or isinstance(op, nn.BatchNormOp) or (
            len(op.results) != 1):
        return False
    views = [v.op for v in op.operands if isinstance(v, OpResult)
             and isinstance(v.op, nn.ReshapeOp)]
    dst = tensor_shape(op.results[0])
    for view in views:
        x = view.operands[0]
        src = tensor_shape(x)
        if tensor_shape(view.results[0]) != dst or only_unit_dims(src, dst) or (
                not _from_concat(x)):
            continue
        groups = dim_groups(src, dst)
        if groups is None:
            continue
        shapes = [None if v is view.results[0] else _regrouped(v, src, dst, groups)
                  for v in op.operands]
        if any(sh is None and v is not view.results[0]
               for sh, v in zip(shapes, op.operands, strict=True)):
            continue
        operands: list[SSAValue] = []
        for v, sh in zip(op.operands, shapes, strict=True):
            if v is view.results[0]:
                operands.append(x)
            elif sh is None or sh == tensor_shape(v) or (
                    all(d == 1 for d in tensor_shape(v)) and len(tensor_shape(v)) <= len(src)):
                operands.append(v)
            else:
                r = nn.ReshapeOp.create(operands=[v], result_types=[_tensor(v, sh)])
                copy_location(op, r)
                rewriter.insert_op(r, InsertPoint.before(op))
                operands.append(r.results[0])
        result = op.results[0]
        moved = type(op).create(operands=operands, result_types=[_tensor(result, src)],
                                attributes=dict(op.attributes), properties=dict(op.properties))
        back = nn.ReshapeOp.create(operands=[moved.results[0]], result_types=[result.type])
        back.results[0].name_hint = result.name_hint
        copy_location(op, moved, back)
        rewriter.replace_op(op, [moved, back])
        if not view.results[0].uses:  # else it would count as a reader of `x`
            rewriter.erase_op(view)
        return True
    return False


@dataclass(frozen=True)
class SinkTransposesPass(ModulePass):
    """Move transposes above the elementwise ops they read, onto the values read from memory.

    The module docstring says which ops a transpose moves through and why."""

    name = "sink-transposes"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewriter = Rewriter()
        work = [o for o in op.walk() if isinstance(o, nn.TransposeOp)]
        while work:  # a transpose that moved up leaves new ones to try further up
            transpose = work.pop()
            if not as_reshape(rewriter, transpose):
                work += sink_one(rewriter, transpose)
        # Likewise a reshape that only adds or drops extents of 1, from the
        # pieces of a concat up (elsewhere it stays: a reduction's epilogue
        # reads its keepdims result, not a reshape of it).
        reshapes = [o for o in op.walk() if isinstance(o, nn.ReshapeOp) and o.result.uses
                    and all(isinstance(u.operation, nn.ConcatOp) for u in o.result.uses)]
        while reshapes:
            reshapes += sink_unit_reshape(rewriter, reshapes.pop())
        # Program order, so an elementwise chain after a regrouped concat moves
        # op by op (each lifted op's reader is met after it).
        for elementwise in [o for o in op.walk() if op_kind(o) is OpKind.ELEMENTWISE]:
            lift_regrouping_reshape(rewriter, elementwise)
