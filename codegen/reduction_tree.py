"""Accumulator algebra of the `nn.reduce_*` ops for generated kernels: the
identity an accumulator starts from, how two partial results combine, and
the tree that combines the lanes of a block through shared memory.

```mlir
%s = nn.reduce_sum %x {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
```
starts from `float32(0.0)`, combines with `+`, and its tree over 4 lanes is

```python
if lane < 2:
    red0[rloc, lane] = red0[rloc, lane] + red0[rloc, lane + 2]
cuda.syncthreads()
if lane < 1:
    red0[rloc, lane] = red0[rloc, lane] + red0[rloc, lane + 1]
cuda.syncthreads()
```
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fusec.codegen.group_body import compute_type
from fusec.codegen.kernel_source import float_literal, int_literal
from fusec.dialects import nn


def identity_literal(r: nn.ReduceOp) -> str:
    """The value an accumulator of `r` starts from."""
    ctype = compute_type(r.results[0])
    if isinstance(r, nn.ReduceMaxOp | nn.ReduceMinOp):
        sign = -1 if isinstance(r, nn.ReduceMaxOp) else 1
        if ctype.startswith("int"):
            info = np.iinfo(ctype)
            return f"{ctype}({int_literal(info.min if sign < 0 else info.max)})"
        return float_literal(sign * float("inf"), ctype)
    if ctype.startswith("int"):
        return f"{ctype}(0)"
    return float_literal(0.0, ctype)


def combine(r: nn.ReduceOp, a: str, b: str) -> str:
    """The expression combining two partial results of `r`."""
    if isinstance(r, nn.ReduceMaxOp):
        return f"max({a}, {b})"
    if isinstance(r, nn.ReduceMinOp):
        return f"min({a}, {b})"
    return f"{a} + {b}"


def mean_scale(r: nn.ReduceOp, count: int) -> str:
    """`1 / count` as a typed literal: a mean is the sum times this."""
    return float_literal(1.0 / count, compute_type(r.results[0]))


def combine_lines(reds: Sequence[nn.ReduceOp], slots: Sequence[int], lanes: int) -> list[str]:
    """The shared-memory tree combining `lanes` partial results per row of
    the scratch arrays `red<slot>` (one per reduction), barriers included.

    Every thread of the block executes each barrier, so the tree must be
    called from the kernel's top scope."""
    lines = ["cuda.syncthreads()"]
    step = lanes // 2
    while step >= 1:
        lines.append(f"if lane < {int_literal(step)}:")
        for r, k in zip(reds, slots, strict=True):
            here, there = f"red{k}[rloc, lane]", f"red{k}[rloc, lane + {int_literal(step)}]"
            lines.append(f"    {here} = {combine(r, here, there)}")
        lines.append("cuda.syncthreads()")
        step //= 2
    return lines
