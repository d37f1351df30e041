"""A scale of Q (or K) by a constant, moved onto the scores by
`fuse-attention`: `(Q * c) Kᵀ = (Q Kᵀ) * c`, so the attention kernel applies
`c` with its other score ops instead of a kernel of its own reading and
writing all of Q before it (timm's `q = q * self.scale; q @ k.transpose(-2,
-1)`, and `q / sqrt(d)`).

```mlir
// before: Q scaled by a kernel of its own
%c = nn.constant dense<0.17677669> : tensor<f32>
%qs = nn.mul %q, %c : (tensor<8x3x49x32xf32>, tensor<f32>) -> tensor<8x3x49x32xf32>
%s = nn.matmul %qs, %kt : (...) -> tensor<8x3x49x49xf32>
%x = nn.add %s, %bias : ...
// after: a score op, which the attention group takes in
%s = nn.matmul %q, %kt : (...) -> tensor<8x3x49x49xf32>
%c_1 = nn.constant dense<0.17677669> : tensor<f32>
%qs = nn.mul %s, %c_1 : (tensor<8x3x49x49xf32>, tensor<f32>) -> tensor<8x3x49x49xf32>
%x = nn.add %qs, %bias : ...
```

The scale is a `nn.mul` by a splat constant (either operand order) or a
`nn.div` by one, between the operand's source and the matmul, with layout
ops after it (Q a slice and reshape of a packed QKV projection, scaled, then
reshaped; K scaled, then transposed). In f16/bf16, PyTorch computes `q *
0.1767` in f32 and rounds once: `cast` to f32, the f32 op, `cast` back; the
three move together, and on the scores they are the f32 scale of the f32
scores that both attention kernels (fusec's and cuDNN's) compute, with no
rounding to the half type (the kernels compute in f32 whatever the casts
say). What the move drops is the program's rounding of `q * c` to the half
type: an error of at most half an ulp of the half type per element of Q,
below the rounding of the scores the program also asks for and the kernels
skip, so within the type's tolerance (docs/scheduling.md, "Attention").

`operand_scale` is the legality predicate (side-effect free: the scale, why
it stays, or None where there is none), `scale_scores` the rewrite and
`restore_scale` its inverse, for an attention `fuse-attention` then does not
fuse: the scores of the three-kernel path are rounded to the half type by
their GEMM, where `q Kᵀ` unscaled could overflow f16's range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from fusec.analysis.attention_pattern import MAX_SCORE_DEPTH, OPERAND_VIEWS, Namer, Refusal
from fusec.analysis.rewriting import copy_location
from fusec.dialects import nn
from fusec.dialects.nn_base import (
    FLOAT_TYPES,
    dense_to_numpy,
    element_type,
    element_type_name,
    numpy_to_dense,
    tensor_shape,
)

OPERANDS = {0: "Q", 1: "K"}
"""The matmul `Q @ Kᵀ`'s operands whose scale moves, by operand index."""


@dataclass(frozen=True)
class OperandScale:
    """A scale of an operand of `Q @ Kᵀ` that can move onto the scores."""

    reader: Operation  # reads the scaled value: a layout op of the operand, or the matmul
    index: int  # the operand of `reader` that is the scaled value
    source: SSAValue  # the unscaled value
    ops: tuple[Operation, ...]  # in order: [cast to f32], nn.mul or nn.div, [cast back]
    constant: nn.ConstantOp  # the factor or divisor, a splat

    @property
    def scale(self) -> Operation:
        """The `nn.mul` or `nn.div`."""
        return next(op for op in self.ops if not isinstance(op, nn.CastOp))


def _owner(v: SSAValue) -> Operation | None:
    return v.op if isinstance(v, OpResult) else None


def _readers(v: SSAValue) -> list[Operation]:
    return [u.operation for u in v.uses]


def _splat(v: SSAValue) -> nn.ConstantOp | None:
    """The constant `v` is, where all its elements are one finite nonzero value."""
    op = _owner(v)
    if not isinstance(op, nn.ConstantOp):
        return None
    values = dense_to_numpy(op.value).reshape(-1)
    if not values.size or not (values == values[0]).all():
        return None
    return op if values[0] != 0 and math.isfinite(float(values[0])) else None


def _scaled(op: Operation | None) -> tuple[SSAValue, nn.ConstantOp] | None:
    """(the scaled tensor, the constant) of `op`, a scale by a splat constant
    that keeps the tensor's shape: `x * c`, `c * x` or `x / c`."""
    if not isinstance(op, nn.MulOp | nn.DivOp):
        return None
    lhs, rhs = op.operands
    if (c := _splat(rhs)) is not None:
        x = lhs
    elif isinstance(op, nn.MulOp) and (c := _splat(lhs)) is not None:
        x = rhs
    else:
        return None
    return (x, c) if tensor_shape(op.results[0]) == tensor_shape(x) else None


def operand_scale(qk: nn.MatmulOp, index: int, describe: Namer
                  ) -> OperandScale | Refusal | None:
    """The scale by a constant of operand `index` (0: Q, 1: Kᵀ) of `qk`
    that `scale_scores` can move onto the scores; why it cannot (at the
    scale); None where that operand is no scale of a value by a constant."""
    reader, at, v = qk, index, qk.operands[index]
    # 1. the layout ops after the scale
    views: list[Operation] = []
    while isinstance(owner := _owner(v), OPERAND_VIEWS):
        views.insert(0, owner)
        reader, at, v = owner, 0, owner.operands[0]
    # 2. the scale, with the casts of a half type's f32 math around it
    back = _owner(v)
    if not isinstance(back, nn.CastOp):
        back = None
    op = _owner(back.x) if back is not None else _owner(v)
    found = _scaled(op)
    if op is None or found is None or \
            element_type_name(element_type(op.results[0])) not in FLOAT_TYPES:
        return None
    x, constant = found
    up = _owner(x) if back is not None else None
    if back is not None and not (isinstance(up, nn.CastOp) and
                                 element_type(up.x) == element_type(back.result)):
        return None  # scaled in a type other than the operand's: no scale of it alone
    source = up.x if isinstance(up, nn.CastOp) else x
    ops = tuple(o for o in (up, op, back) if o is not None)
    # 3. each step from the scale to the matmul read by the next alone
    chain = [*ops, *views]
    for o, after in zip(chain, [*chain[1:], qk], strict=True):
        readers = _readers(o.results[0])
        if len(readers) != 1 or readers[0] is not after:
            other = next((r for r in readers if r is not after), after)
            return Refusal(op, f"{describe(o)} is also read by {describe(other)}")
    return OperandScale(reader, at, source, ops, constant)


@dataclass(frozen=True)
class MovedScale:
    """A scale `scale_scores` moved onto the scores, for `restore_scale`."""

    reader: Operation  # now reads the unscaled value
    index: int
    ops: tuple[Operation, ...]  # on the scores: [cast], nn.mul or nn.div, [cast]


def room(score_ops: int, scale: OperandScale) -> Refusal | None:
    """Why scores through `score_ops` ops cannot take `scale`'s ops too:
    the matcher would no longer reach `Q @ Kᵀ` (`MAX_SCORE_DEPTH`)."""
    if score_ops + len(scale.ops) <= MAX_SCORE_DEPTH:
        return None
    return Refusal(scale.scale, "with it the scores would go through more than "
                   f"{MAX_SCORE_DEPTH} elementwise ops")


def _rebuild(template: Sequence[Operation], x: SSAValue, factor: nn.ConstantOp,
             at: InsertPoint) -> list[Operation]:
    """`template` ([cast], nn.mul or nn.div by a splat constant, [cast])
    applied to `x` at its shape, inserted at `at`: the constant as a
    scalar, so that it broadcasts to any shape."""
    shape = tensor_shape(x)
    one = dense_to_numpy(factor.value).reshape(-1)[:1].reshape(())
    scalar = TensorType(element_type(factor.result), ())
    made: list[Operation] = []
    v = x
    for t in template:
        out = TensorType(element_type(t.results[0]), shape)
        if isinstance(t, nn.CastOp):
            new: Operation = nn.CastOp.create(operands=[v], result_types=[out])
        else:
            c = nn.ConstantOp.create(result_types=[scalar],
                                     attributes={"value": numpy_to_dense(one, scalar)})
            c.results[0].name_hint = factor.result.name_hint
            copy_location(factor, c)
            made.append(c)
            new = type(t).create(operands=[v, c.results[0]], result_types=[out])
        new.results[0].name_hint = t.results[0].name_hint
        copy_location(t, new)
        made.append(new)
        v = new.results[0]
    for op in made:
        Rewriter.insert_op(op, at)
    return made


def _erase(ops: Sequence[Operation]) -> None:
    """Erase `ops` (a chain, in order, read only by each other) and the
    constants they read that nothing else reads."""
    constants = [_owner(v) for op in ops for v in op.operands]
    for op in reversed(ops):
        Rewriter.erase_op(op)
    for c in constants:
        if isinstance(c, nn.ConstantOp) and not c.results[0].uses and c.parent is not None:
            Rewriter.erase_op(c)


def scale_scores(scale: OperandScale, qk: nn.MatmulOp) -> MovedScale:
    """Move `scale` (what `operand_scale` found for `qk`) onto `qk`'s
    scores: the same ops, at the scores' shape, right after `qk`."""
    # 1. the operand read unscaled
    scale.reader.operands[scale.index] = scale.source
    # 2. the scale of the scores, which every reader of the scores reads instead
    made = _rebuild(scale.ops, qk.result, scale.constant, InsertPoint.after(qk))
    moved = tuple(op for op in made if not isinstance(op, nn.ConstantOp))
    for use in list(qk.result.uses):
        if use.operation is not moved[0]:
            use.operation.operands[use.index] = moved[-1].results[0]
    # 3. the scale of the operand, read by nothing now
    _erase(scale.ops)
    return MovedScale(scale.reader, scale.index, moved)


def restore_scale(moved: MovedScale) -> None:
    """Undo `scale_scores`: the scale back on the operand `moved.reader`
    reads, the scores as the matmul computes them."""
    first, last = moved.ops[0], moved.ops[-1]
    scale = next(op for op in moved.ops if not isinstance(op, nn.CastOp))
    factor = _owner(scale.operands[1])
    assert isinstance(factor, nn.ConstantOp)
    # 1. the operand scaled again, before its reader
    x = moved.reader.operands[moved.index]
    made = _rebuild(moved.ops, x, factor, InsertPoint.before(moved.reader))
    moved.reader.operands[moved.index] = made[-1].results[0]
    # 2. the scores unscaled, their scale erased
    last.results[0].replace_all_uses_with(first.operands[0])
    _erase(moved.ops)
