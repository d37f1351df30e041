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

from fusec.analysis.group_body import compute_type
from fusec.analysis.targets import WARP_SIZE
from fusec.codegen.kernel_source import float_literal, int_literal, max_expr, min_expr
from fusec.dialects import nn

# True while kernels run in numba's CUDA simulator, which has no warp
# shuffles; a compile-time constant on the GPU, so the branch not taken is
# removed before PTX is written.
SIMULATED = "numba.cuda.core.config.ENABLE_CUDASIM"


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
    """The expression combining two partial results of `r` (NaN propagating
    for max and min: `kernel_source.max_expr`, which may repeat `a` and `b`,
    so they must be names or reads without side effects)."""
    if isinstance(r, nn.ReduceMaxOp):
        return max_expr(a, b, compute_type(r.results[0]))
    if isinstance(r, nn.ReduceMinOp):
        return min_expr(a, b, compute_type(r.results[0]))
    return f"{a} + {b}"


def mean_scale(r: nn.ReduceOp, count: int) -> str:
    """`1 / count` as a typed literal: a mean is the sum times this."""
    return float_literal(1.0 / count, compute_type(r.results[0]))


def combine_lines(reds: Sequence[nn.ReduceOp], slots: Sequence[int], lanes: int,
                  transposed: bool = False) -> list[str]:
    """The shared-memory tree combining `lanes` partial results per row of
    the scratch arrays `red<slot>` (one per reduction), barriers included;
    `transposed` scratch arrays are indexed `[lane, rloc]`.

    Every thread of the block executes each barrier, so the tree must be
    called from the kernel's top scope."""
    lines = ["cuda.syncthreads()"]
    step = lanes // 2
    while step >= 1:
        lines.append(f"if lane < {int_literal(step)}:")
        for r, k in zip(reds, slots, strict=True):
            other = f"lane + {int_literal(step)}"
            here, there = (f"red{k}[lane, rloc]", f"red{k}[{other}, rloc]") if transposed \
                else (f"red{k}[rloc, lane]", f"red{k}[rloc, {other}]")
            if isinstance(r, nn.ReduceMaxOp | nn.ReduceMinOp):  # combine repeats its operands
                lines += [f"    mine{k} = {here}", f"    theirs{k} = {there}"]
                here_value, there_value = f"mine{k}", f"theirs{k}"
            else:
                here_value, there_value = here, there
            lines.append(f"    {here} = {combine(r, here_value, there_value)}")
        lines.append("cuda.syncthreads()")
        step //= 2
    return lines


def shuffle_combine_lines(
    reds: Sequence[nn.ReduceOp], slots: Sequence[int], lanes: int, block_threads: int
) -> list[str]:
    """Combine the accumulators `acc<slot>` of the `lanes` lanes of each row
    with warp shuffles (butterfly: every lane ends with the total), then, when
    a row spans several warps, through one shared-memory slot per warp
    (`red<slot>[rloc, warp]`) and ONE barrier for all reductions of the stage.

    Rows are `lanes` consecutive threads (`threadIdx.x`), so a butterfly with
    offsets below `lanes` never mixes two rows. Called from the kernel's top
    scope: every thread of the block reaches the barrier."""
    full = min(block_threads, WARP_SIZE)
    mask = hex((1 << full) - 1)
    lines: list[str] = []
    for r, k in zip(reds, slots, strict=True):
        step = min(lanes, WARP_SIZE) // 2
        while step >= 1:
            # every lane shuffles, unconditionally, before the values combine
            lines.append(f"other{k} = cuda.shfl_xor_sync({mask}, acc{k}, {int_literal(step)})")
            lines.append(f"acc{k} = {combine(r, f'acc{k}', f'other{k}')}")
            step //= 2
    warps = lanes // WARP_SIZE
    if warps <= 1:
        return lines
    lines.append(f"if lane % {int_literal(WARP_SIZE)} == 0:")
    lines += [f"    red{k}[rloc, lane // {int_literal(WARP_SIZE)}] = acc{k}" for k in slots]
    lines.append("cuda.syncthreads()")
    for r, k in zip(reds, slots, strict=True):
        lines.append(f"acc{k} = red{k}[rloc, 0]")
        for w in range(1, warps):
            lines.append(f"acc{k} = {combine(r, f'acc{k}', f'red{k}[rloc, {w}]')}")
    return lines


def block_combine_lines(
    reds: Sequence[nn.ReduceOp], slots: Sequence[int], lanes: int, block_threads: int
) -> list[str]:
    """`acc<slot>` of every lane replaced by its row's total: warp shuffles on
    the GPU, the shared-memory tree (`combine_lines`) in the simulator."""
    tree = [f"red{k}[rloc, lane] = acc{k}" for k in slots]
    tree += combine_lines(reds, slots, lanes)
    tree += [f"acc{k} = red{k}[rloc, 0]" for k in slots]
    shuffled = shuffle_combine_lines(reds, slots, lanes, block_threads)
    return [
        f"if {SIMULATED}:",
        *("    " + line for line in tree),
        "else:",
        *("    " + line for line in (shuffled or ["pass"])),
    ]
