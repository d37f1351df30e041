"""Composite ops inside a group body, expanded for code generation.

The default pipeline decomposes nn.softmax, nn.layer_norm, ... before fusion,
but a group may still hold one (a `fusion` contract keeps it whole, or the
pipeline ran without `decompose`). The emitters only understand primitives, so
they work on a copy of the group whose body went through the decompose
pass's patterns (`analysis/composite_patterns.py`); the original IR is untouched.

```mlir
%y = fusion.group (%x) {kind = "reduction"} : (tensor<4x8xf32>) -> tensor<4x8xf32> {
^bb0(%a: tensor<4x8xf32>):
  %s = nn.softmax %a {axis = -1} : tensor<4x8xf32>
  fusion.yield %s : tensor<4x8xf32>
}
// is emitted as if its body were reduce_max, sub, exp, reduce_sum, div
```
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriteWalker,
    RewritePattern,
)

from fusec.analysis.composite_patterns import PATTERNS
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp

COMPOSITES = (nn.SoftmaxOp, nn.LogSoftmaxOp, nn.LayerNormOp, nn.RmsNormOp, nn.BatchNormOp)


def has_composites(group: GroupOp) -> bool:
    """Whether the group's body holds a composite op."""
    return any(isinstance(op, COMPOSITES) for op in group.block.ops)


@contextmanager
def decomposed(group: GroupOp) -> Iterator[GroupOp]:
    """`group` itself, or a detached copy with its composites expanded (erased
    again on exit, so the module's use lists are left as they were)."""
    if not has_composites(group):
        yield group
        return
    clone = group.clone()
    for op in clone.block.ops:
        # The pass leaves contract-carrying composites whole; here they must go.
        op.attributes.pop("fusion", None)
    walker = PatternRewriteWalker(
        GreedyRewritePatternApplier(
            list[RewritePattern]([p() for p in PATTERNS.values()]), dce_enabled=False
        ),
        apply_recursively=False,
    )
    walker.rewrite_region(clone.body)
    try:
        yield clone
    finally:
        clone.erase(safe_erase=False)
