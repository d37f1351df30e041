"""Chains of layout ops as one copy kernel.

A slice, reshape or transpose that reads another one's result (nothing else
reading the value between them) joins its group: the chain composes into one
strided view of the value at its root (`analysis/view_operands.py`), so one
kernel reads that view once and writes the chain's result once, where each
op on its own would be a copy kernel (the reshapes between them are free).
The multi-head split of a packed QKV projection is the usual case:

```mlir
%q = nn.slice %qkv {starts = [0, 0, 0], limits = [8, 512, 768]} : ...
%r = nn.reshape %q : (tensor<8x512x768xf32>) -> tensor<8x512x12x64xf32>
%h = nn.transpose %r {perm = [0, 2, 1, 3]} : ... -> tensor<8x12x512x64xf32>
```

is one `layout` group whose kernel reads `qkv` at offset `0` and strides
`(512 * 2304, 64, 2304, 1)`: no slice result is written or read again. The
chain is emitted as a pointwise copy of its composed view, staged through
the transposed-operand tile when the view moves the innermost axis
(`codegen/layout.py`). A reshape that merges dimensions the view does not
keep contiguous is read through the chain's index map over parts of its
dimensions (`analysis/view_map.py`); only one with no such map stays a
chain break.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fusec.analysis.view_operands import CHAINED_VIEWS, is_chain_end, operand_map

if TYPE_CHECKING:  # types only: legality imports this module
    from fusec.analysis.fusion_legality import Candidate, Merged


def view_chain(c: Candidate) -> Merged | str | None:
    """The two groups of layout ops of `c` as one chain (kind "view", the
    consumer's shape), the reason they cannot be one, or None when the pair
    is not two groups of slices, reshapes and transposes (or views do not
    fold: option fold_views)."""
    if not c.options.fold_views or not all(
            isinstance(op, CHAINED_VIEWS) for g in (c.a, c.b) for op in g.ops):
        return None
    if c.edges(c.a, c.b):
        src, dst = c.a, c.b
    elif c.edges(c.b, c.a):
        src, dst = c.b, c.a
    else:
        return "two layout ops merge only when one reads the other's result"
    inside = set((*c.a.ops, *c.b.ops))
    held = [v for v in c.outputs if v in src.outputs]
    if held:
        owner = held[0].owner
        reader = next(u for u in c.dep.consumers(held[0]) if not c.in_pair(u))
        return (f"{c.dep.describe(owner)} is also read by {c.dep.describe(reader)}; a chain "  # type: ignore[arg-type]
                "of layout ops becomes one copy only through values nothing else reads")
    ends = [op for op in inside if is_chain_end(op, inside)]
    if len(ends) != 1:
        return "a chain of layout ops is one copy of one result"
    found = operand_map(ends[0], inside)
    if isinstance(found, str):
        return found
    return ("view", dst.shape, (), None)
