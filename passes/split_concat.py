"""Splitting an `nn.concat` of very many operands into a tree of concats.

A kernel takes each operand as an argument: numba passes an array as 5 + 2 x
rank 8-byte words, CUDA limits a kernel's parameters to 32764 bytes, and the
emitted kernel selects the operand by an `if`/`elif` chain that Python cannot
even parse past a few thousand arms. So a concat of more than
`max_operands` operands becomes concats of at most `max_operands` each,
concatenated in turn (along the same axis, so the values are unchanged).
`decompose` applies it (option `max_concat_operands`).

```mlir
// max_operands = 2
%y = nn.concat %a, %b, %c {axis = 0} : (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>)
    -> tensor<3xf32>
// becomes
%y_part = nn.concat %a, %b {axis = 0} : (tensor<1xf32>, tensor<1xf32>) -> tensor<2xf32>
%y = nn.concat %y_part, %c {axis = 0} : (tensor<2xf32>, tensor<1xf32>) -> tensor<3xf32>
```
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr, IntegerType, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from fusec.analysis.rewriting import copy_location
from fusec.dialects import nn, shapes
from fusec.dialects.nn_base import element_type, tensor_shape


class SplitConcatPattern(RewritePattern):
    """Replaces a concat of more than `max_operands` operands by a tree."""

    def __init__(self, max_operands: int) -> None:
        if max_operands < 2:
            raise ValueError(f"max_concat_operands must be at least 2, got {max_operands}")
        self.max_operands = max_operands

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if not isinstance(op, nn.ConcatOp) or len(op.inputs) <= self.max_operands:
            return
        axis = op.axis
        level: list[SSAValue] = list(op.inputs)
        new_ops: list[Operation] = []
        while len(level) > self.max_operands:
            chunks = [level[i:i + self.max_operands]
                      for i in range(0, len(level), self.max_operands)]
            level = [c[0] if len(c) == 1 else _concat(c, axis, op, new_ops) for c in chunks]
        final = _concat(level, axis, op, new_ops)
        final.name_hint = op.result.name_hint
        copy_location(op, *new_ops)
        rewriter.replace(op, new_ops)


def _concat(values: list[SSAValue], axis: int, source: nn.ConcatOp,
            out: list[Operation]) -> SSAValue:
    """Append `nn.concat values {axis}` to `out`; its result."""
    shape = shapes.concat_shape([tensor_shape(v) for v in values], axis)
    op = nn.ConcatOp.create(
        operands=values, result_types=[TensorType(element_type(source.result), shape)],
        attributes={"axis": IntegerAttr(axis, IntegerType(64))})
    hint = source.result.name_hint
    op.result.name_hint = f"{hint}_part" if hint else "concat_part"
    out.append(op)
    return op.result
