"""A user pass: `fold-double-neg` rewrites `nn.neg(nn.neg(x))` to `x`.

Load it without installing anything:

    fusec model.mlir --load-pass-plugin docs/examples/fold_double_neg.py -p fold-double-neg

```mlir
// before
%a = nn.neg %x : tensor<4xf32>
%b = nn.neg %a : tensor<4xf32>
%c = nn.exp %b : tensor<4xf32>
// after
%c = nn.exp %x : tensor<4xf32>
```

Negation is exact for floats and wraps symmetrically for integers, so the fold
never changes a result.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from fusec.dialects import nn


@dataclass
class FoldDoubleNeg(RewritePattern):
    """Matches the outer `nn.neg` of a pair and forwards the inner operand."""

    erase_dead: bool

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: nn.NegOp, rewriter: PatternRewriter) -> None:
        inner = op.x.owner
        if not isinstance(inner, nn.NegOp):
            return
        # Every reader of -(-x) now reads x; the outer neg goes away.
        rewriter.replace(op, [], [inner.x])
        # The inner neg may still have other readers; erase it only if not.
        if self.erase_dead and not inner.result.uses:
            rewriter.erase(inner)


@dataclass(frozen=True)
class FoldDoubleNegPass(ModulePass):
    """Fold nn.neg(nn.neg(x)) to x.

    Option `erase_dead` (default true; `-p 'fold-double-neg{erase-dead=false}'`)
    says whether an inner `nn.neg` that nothing reads any more is erased.
    """

    name = "fold-double-neg"

    erase_dead: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # dce_enabled=False: the applier would otherwise erase every unused op
        # in the module, not only the negations this pass made dead.
        applier = GreedyRewritePatternApplier([FoldDoubleNeg(self.erase_dead)], dce_enabled=False)
        PatternRewriteWalker(applier).rewrite_module(op)
