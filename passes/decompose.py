"""The `decompose` pass: composite `nn` ops become `nn` primitives.

Fusion reasons about one vocabulary (elementwise ops, reductions, layout), so
the composites of the spec (softmax, log_softmax, layer_norm, rms_norm,
batch_norm) are expanded before it runs, by the rewrites of
`analysis/composite_patterns.py`. Each new op carries the location of the
composite it came from, so a later error still points at the user's line.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriteWalker,
    RewritePattern,
)

from fusec.analysis.composite_patterns import PATTERNS
from fusec.passes.pow_by_constant import PowByConstantPattern
from fusec.passes.split_concat import SplitConcatPattern


@dataclass(frozen=True)
class DecomposePass(ModulePass):
    """Expand softmax, log_softmax, layer_norm, rms_norm and batch_norm into nn primitives.

    ```mlir
    // before
    %y = nn.softmax %x {axis = -1} : tensor<4x8xf32>
    // after `fusec -p decompose`
    %y_max = nn.reduce_max %x {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
    %y_shifted = nn.sub %x, %y_max : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    %y_exp = nn.exp %y_shifted : tensor<4x8xf32>
    %y_sum = nn.reduce_sum %y_exp {axes = [1], keepdims = true}
        : (tensor<4x8xf32>) -> tensor<4x1xf32>
    %y = nn.div %y_exp, %y_sum : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    ```

    Option `ops` limits the expansion to some composites, by name with or
    without the `nn.` prefix: `-p 'decompose{ops=softmax,layer_norm}'`; empty
    (the default) means all. A composite carrying a `fusion` contract is left
    whole. Dead ops are kept: removing them is not this pass's decision.

    A concat of more than `max_concat_operands` operands becomes a tree of
    smaller concats (`passes/split_concat.py`): one kernel cannot take
    thousands of arguments. A power by a constant 2, 3 or 4 becomes
    products (`passes/pow_by_constant.py`): a kernel computes `pow` as a
    general `powf`, tens of instructions per element.
    """

    name = "decompose"

    ops: tuple[str, ...] = ()
    max_concat_operands: int = 32

    def __post_init__(self) -> None:
        if self.max_concat_operands < 2:
            raise ValueError("must be at least 2")
        unknown = [n for n in self.ops if n.removeprefix("nn.") not in PATTERNS]
        if unknown:
            raise ValueError(
                f"unknown composite {', '.join(map(repr, unknown))} in 'ops'; "
                f"expected some of {', '.join(PATTERNS)}"
            )

    def selected(self) -> list[str]:
        """The short names of the composites this instance expands."""
        wanted = {n.removeprefix("nn.") for n in self.ops}
        return [n for n in PATTERNS if not wanted or n in wanted]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        patterns: list[RewritePattern] = [PATTERNS[n]() for n in self.selected()]
        patterns.append(SplitConcatPattern(self.max_concat_operands))
        patterns.append(PowByConstantPattern())
        # dce_enabled=False: the greedy applier would otherwise erase every
        # unused (pure) nn op in the module, which is not decompose's call.
        # apply_recursively=False: the new ops are primitives, nothing to revisit.
        walker = PatternRewriteWalker(
            GreedyRewritePatternApplier(patterns, dce_enabled=False),
            apply_recursively=False,
        )
        walker.rewrite_module(op)
