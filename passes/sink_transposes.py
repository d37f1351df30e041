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


def _movable(op: Operation, transpose: nn.TransposeOp) -> bool:
    """Whether the elementwise `op` may take `transpose`'s place: its one
    result read by the transpose alone."""
    return (op_kind(op) is OpKind.ELEMENTWISE
            and not isinstance(op, nn.BatchNormOp) and len(op.results) == 1
            and [u.operation for u in op.results[0].uses] == [transpose])


def _transposed(rewriter: Rewriter, value: SSAValue, rank: int, perm: list[int],
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
    operands = [_transposed(rewriter, v, rank, perm, op) for v in op.operands]
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
