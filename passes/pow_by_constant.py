"""A power by a constant small whole exponent becomes multiplications.

`nn.pow %x, %c` with `%c` a splat constant 2, 3 or 4 (GPT-2's and BERT's
tanh GELU `x ** 3`, Llama's RMSNorm `x.pow(2)`) is `x * x`, `(x * x) * x` or
`(x * x) * (x * x)`. A kernel computes `pow` as a general `powf` (logarithm,
exponential and special cases: tens of instructions per element, enough to
make a memory-bound GELU kernel compute-bound), where the products take one
to three. `x * x` is exact where `powf(x, 2)` is within its error bound;
`x * x * x` rounds twice (at most one ulp more than a correctly rounded
cube), as inductor's code does. Any other exponent, or one that is not a
constant, stays `nn.pow`. `decompose` applies it.

```mlir
%c = nn.constant dense<3.0> : tensor<f32>
%y = nn.pow %x, %c : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
// becomes
%y_square = nn.mul %x, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
%y = nn.mul %y_square, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
```
"""

from __future__ import annotations

from xdsl.ir import Operation
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from fusec.analysis.composite_patterns import Expansion
from fusec.dialects import nn
from fusec.dialects.nn_base import splat_value

WHOLE_EXPONENTS = (2, 3, 4)
"""Exponents written as products (more would round more often than powf)."""


class PowByConstantPattern(RewritePattern):
    """Replaces `nn.pow` by a splat constant in `WHOLE_EXPONENTS` with products."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if not isinstance(op, nn.PowOp):
            return
        x, exponent = op.operands
        owner = exponent.owner
        if not isinstance(owner, nn.ConstantOp) or x.type != op.results[0].type:
            return  # not a constant, or the exponent broadcasts x
        value = splat_value(owner.value)
        if value is None or float(value) not in WHOLE_EXPONENTS:
            return
        n = int(value)
        build = Expansion(op)
        square = build.binary(nn.MulOp, x, x, "square")
        if n == 3:
            build.binary(nn.MulOp, square, x, "cube")
        elif n == 4:
            build.binary(nn.MulOp, square, square, "fourth")
        build.replace_source(rewriter)
