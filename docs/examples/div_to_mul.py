"""A user pass: `div-to-mul` turns a division by a constant into a
multiplication by its reciprocal, computed at compile time. It shows how a
pass reads a constant's value, writes a new constant, builds a new op, keeps
source locations and reports an error in the user's program.

    fusec docs/examples/div_to_mul.mlir --load-pass-plugin docs/examples/div_to_mul.py -p div-to-mul

```mlir
// before
%c = nn.constant dense<[2.0, 4.0]> : tensor<2xf32>
%y = nn.div %x, %c : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
// after
%c_inv = nn.constant dense<[0.5, 0.25]> : tensor<2xf32>
%y = nn.mul %x, %c_inv : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
```

`x * (1/c)` may differ from `x / c` in the last bit when 1/c is not exact in
the element type: a real pass would offer the rewrite behind an option.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from fusec.analysis.diagnostics import op_error
from fusec.analysis.rewriting import copy_location
from fusec.dialects import nn
from fusec.dialects.nn_base import dense_to_numpy, numpy_to_dense


class DivToMul(RewritePattern):
    """Matches `nn.div %x, %c` where `%c` is an `nn.constant`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.DivOp, rewriter: PatternRewriter) -> None:
        divisor = op.rhs.owner
        if not isinstance(divisor, nn.ConstantOp):
            return
        # Read the constant's value: a NumPy array of its shape and element type.
        values = dense_to_numpy(divisor.value)
        if not np.all(values):
            raise op_error(op, "'nn.div' op divides by a constant that holds zero")
        # Write a new constant of the same type holding 1/c.
        t = divisor.result.type
        assert isinstance(t, TensorType)
        reciprocal = nn.ConstantOp.create(
            result_types=[t], attributes={"value": numpy_to_dense(1.0 / values, t)})
        reciprocal.result.name_hint = f"{divisor.result.name_hint or 'c'}_inv"
        # Build the new op: operands, result types (and attributes, if any).
        mul = nn.MulOp.create(operands=[op.lhs, reciprocal.result],
                              result_types=[op.result.type])
        # Errors about the new ops still point at the division's line.
        copy_location(op, reciprocal, mul)
        # Insert both before the division, point its readers at mul, erase it.
        rewriter.replace_op(op, [reciprocal, mul])
        if not divisor.result.uses:
            rewriter.erase_op(divisor)


@dataclass(frozen=True)
class DivToMulPass(ModulePass):
    """Turn divisions by a constant into multiplications by its reciprocal."""

    name = "div-to-mul"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        applier = GreedyRewritePatternApplier([DivToMul()], dce_enabled=False)
        PatternRewriteWalker(applier, apply_recursively=False).rewrite_module(op)
