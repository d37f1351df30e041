"""The `fold-empty` pass: values with a zero-size dimension become constants.

A tensor with a zero in its shape holds nothing, so no kernel needs to
compute it, and an op that reads one but has elements of its own computes
them from no input at all. Both have a value known at compile time, as in
NumPy and PyTorch:

- an op whose results are all empty becomes an empty constant (`dense<>`);
- `nn.reduce_sum` over an empty axis is 0 everywhere, `nn.reduce_mean` NaN
  (0 / 0); `nn.reduce_max` / `nn.reduce_min` there are verifier errors;
- `nn.matmul` with K = 0 and `nn.conv2d` with no input channels are 0;
- `nn.concat` drops its empty operands (and with one left is that operand).

```mlir
// before
%s = nn.reduce_sum %x {axes = [1]} : (tensor<3x0xf32>) -> tensor<3xf32>
// after `fusec -p fold-empty`
%s = nn.constant dense<0.0> : tensor<3xf32>
```

Every constant is a splat or empty, so this costs nothing whatever the
shape; later passes fold the ops that read them (`fold-constants`) or turn
them into kernel literals (`group-each-op`). Code generation never sees a
kernel with an empty dimension, and nothing is launched for empty values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from fusec.analysis.dependency_graph import functions
from fusec.analysis.rewriting import copy_location
from fusec.dialects import nn
from fusec.dialects.nn_base import NNOp, numpy_dtype, numpy_to_dense, tensor_shape
from fusec.dialects.shapes import numel


def _empty(value: SSAValue) -> bool:
    return numel(tensor_shape(value)) == 0


def _constant_of(op: Operation, fill: float) -> nn.ConstantOp:
    """A constant of `op`'s single result type, every element `fill` (none
    when the type is empty), named and located as `op`."""
    result = op.results[0]
    t = result.type
    assert isinstance(t, TensorType)
    shape = tensor_shape(result)
    value = np.broadcast_to(np.asarray(fill, numpy_dtype(t.element_type)), shape)
    constant = nn.ConstantOp.create(result_types=[t],
                                    attributes={"value": numpy_to_dense(value, t)})
    constant.result.name_hint = result.name_hint
    copy_location(op, constant)
    return constant


def _fill(op: Operation) -> float | None:
    """The value of every element of `op`'s non-empty result when it reads
    an empty operand, or None when `op` computes it as usual."""
    if isinstance(op, nn.ReduceSumOp | nn.ReduceMeanOp):
        shape = op.operand_shape()
        if any(shape[a] == 0 for a in op.axes):
            return 0.0 if isinstance(op, nn.ReduceSumOp) else float("nan")
    if isinstance(op, nn.MatmulOp) and op.operand_shape(0)[-1] == 0:
        return 0.0
    if isinstance(op, nn.Conv2dOp) and _empty(op.weight):
        return 0.0
    return None


def _drop_empty_concat_operands(op: nn.ConcatOp) -> None:
    kept = [v for v in op.inputs if not _empty(v)]
    if len(kept) == len(op.inputs):
        return
    if len(kept) == 1 and kept[0].type == op.result.type:
        op.result.replace_all_uses_with(kept[0])
        Rewriter.erase_op(op)
        return
    op.operands = kept


@dataclass(frozen=True)
class FoldEmptyPass(ModulePass):
    """Replace ops on tensors with a zero-size dimension by the constants they compute.

    In program order; the module docstring says which constant each op becomes."""

    name = "fold-empty"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in functions(op):
            for inner in list(func.body.block.ops):
                if not isinstance(inner, NNOp) or isinstance(inner, nn.ConstantOp):
                    continue
                if isinstance(inner, nn.ConcatOp) and not _empty(inner.result):
                    _drop_empty_concat_operands(inner)
                    continue
                if all(_empty(r) for r in inner.results):
                    fill: float | None = 0.0
                else:
                    fill = _fill(inner) if len(inner.results) == 1 else None
                if fill is not None:
                    Rewriter.replace_op(inner, _constant_of(inner, fill))
