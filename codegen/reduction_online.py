"""Online softmax statistics: the max of a row and the sum of `exp(a - max)`
accumulated in ONE pass over the row (Milakov and Gimelshein, 2018).

A decomposed softmax (or log-softmax) reduces in two passes:

```mlir
%m = nn.reduce_max %a {axes = [0], keepdims = true} : (tensor<8x4xf32>) -> tensor<1x4xf32>
%d = nn.sub %a, %m : (tensor<8x4xf32>, tensor<1x4xf32>) -> tensor<8x4xf32>
%e = nn.exp %d : tensor<8x4xf32>
%s = nn.reduce_sum %e {axes = [0], keepdims = true} : (tensor<8x4xf32>) -> tensor<1x4xf32>
```

When the row does not stay on chip, each pass reads it from memory; with
the final pass that writes the outputs that is three reads. Each lane can
instead keep a running max `m` and a sum `s` of `exp(a - m)`, rescaled when
the max grows, and pairs `(m, s)` combine as `M = max(m1, m2)`,
`S = s1 * exp(m1 - M) + s2 * exp(m2 - M)`: the row is read twice. A factor
is 1 when its max is `M` itself, so a row that starts with `-inf` sums no
`exp(-inf - -inf)` NaN; a NaN element still makes both results NaN. When the
final max is infinite the two-pass sum holds `exp(inf - inf)`, NaN: the
finished sum is set to NaN then (`finish_lines`), as the reference has it.
"""

from __future__ import annotations

from fusec.analysis.reduction_passes import online_softmax_max
from fusec.codegen.group_body import compute_type
from fusec.codegen.kernel_source import exp_function, float_literal, int_literal
from fusec.codegen.reduction_plan import RowAnalysis
from fusec.codegen.reduction_tree import combine
from fusec.dialects import nn


def online_pair(ra: RowAnalysis) -> tuple[nn.ReduceMaxOp, nn.ReduceSumOp] | None:
    """The (max, sum) reductions that can share one pass: exactly two
    stages, one `reduce_max` of `a` in the first, and in the second one
    `reduce_sum` of `exp(a - max)`, in a float compute type; else None."""
    if ra.stages != 2 or len(ra.reductions) != 2:
        return None
    first, second = sorted(ra.reductions, key=lambda r: ra.stage[r.results[0]])
    if not isinstance(first, nn.ReduceMaxOp) or not isinstance(second, nn.ReduceSumOp):
        return None
    if not compute_type(first.results[0]).startswith("float"):
        return None
    if online_softmax_max(second) is not first:
        return None
    return first, second


def _factor(m: str, big: str, ctype: str) -> str:
    """`exp(m - big)`, exactly 1 when `m` is `big` (also both `-inf`)."""
    return f"({float_literal(1.0, ctype)} if {m} == {big} else {exp_function(ctype)}({m} - {big}))"


def update_lines(r_max: nn.ReduceMaxOp, m: str, s: str, v: str) -> list[str]:
    """Fold element `v` into the running max `m` and sum `s`: one `exp` per
    element (the rescale when the max grows, else the element's term)."""
    ctype = compute_type(r_max.results[0])
    one = float_literal(1.0, ctype)
    return [
        f"online_v = {v}",
        f"if online_v > {m}:",
        f"    {s} = {s} * {exp_function(ctype)}({m} - online_v) + {one}",
        f"    {m} = online_v",
        f"elif online_v == {m}:",
        f"    {s} += {one}",
        "else:  # smaller, or a NaN on either side (the max keeps it)",
        f"    {s} += {exp_function(ctype)}(online_v - {m})",
        f"    {m} = {combine(r_max, m, 'online_v')}",
    ]


def pair_tree_lines(r_max: nn.ReduceMaxOp, km: int, ks: int, lanes: int,
                    transposed: bool) -> list[str]:
    """The shared-memory tree combining the lanes' `(max, sum)` pairs in
    `red<km>` and `red<ks>` (see `reduction_tree.combine_lines`)."""
    ctype = compute_type(r_max.results[0])

    def at(k: int, lane: str) -> str:
        return f"red{k}[{lane}, rloc]" if transposed else f"red{k}[rloc, {lane}]"

    lines = ["cuda.syncthreads()"]
    step = lanes // 2
    while step >= 1:
        there = f"lane + {int_literal(step)}"
        lines += [
            f"if lane < {int_literal(step)}:",
            f"    m_here = {at(km, 'lane')}",
            f"    m_there = {at(km, there)}",
            f"    m_both = {combine(r_max, 'm_here', 'm_there')}",
            f"    {at(ks, 'lane')} = {at(ks, 'lane')} * {_factor('m_here', 'm_both', ctype)}"
            f" + {at(ks, there)} * {_factor('m_there', 'm_both', ctype)}",
            f"    {at(km, 'lane')} = m_both",
            "cuda.syncthreads()",
        ]
        step //= 2
    return lines


def finish_lines(r_max: nn.ReduceMaxOp, res_m: str, res_s: str) -> list[str]:
    """The combined sum is NaN where the max is infinite (see the module
    docstring): `exp(a - max)` is `exp(inf - inf)` there for some element."""
    nan = float_literal(float("nan"), compute_type(r_max.results[0]))
    return [f"if math.isinf({res_m}):", f"    {res_s} = {nan}"]
