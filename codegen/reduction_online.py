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

Chunked update. A streamed pass folds the elements of one unrolled step
(`unroll` of them per lane, loaded first, so their loads are in flight
together) at once (`chunk_update_lines`): the chunk's max `c`, `M = max(m, c)`,
then `s = s * exp(m - M') + sum exp(a_i - M')` with `M' = M`, or 0 where
`M` is `-inf` (every element so far `-inf`: each term is then
`exp(-inf) = 0`, never `exp(-inf - -inf)`, and a later finite max
multiplies the zero sum by `exp(-inf) = 0`). No branch per element, one
`exp` per element plus one per chunk, and the terms of a chunk are
independent. Elements past the row's end enter as `-inf` (a zero term).

Split rows. A two-kernel split (`codegen/reduction.py`, "Split passes")
leaves one `(m, s)` pair per block; `split_combine_lines` folds a lane's
share of them with the pair rule above.
"""

from __future__ import annotations

from fusec.analysis.group_body import compute_type
from fusec.codegen.kernel_source import exp_function, float_literal, int_literal
from fusec.codegen.reduction_tree import combine
from fusec.dialects import nn


def _factor(m: str, big: str, ctype: str) -> str:
    """`exp(m - big)`, exactly 1 when `m` is `big` (also both `-inf`)."""
    return f"({float_literal(1.0, ctype)} if {m} == {big} else {exp_function(ctype)}({m} - {big}))"


def chunk_update_lines(r_max: nn.ReduceMaxOp, m: str, s: str, vals: list[str]) -> list[str]:
    """Fold the chunk of elements named `vals` into the running max `m` and
    sum `s` (see "Chunked update"): the chunk's max by a tree of pairs, one
    select on the new max, then the rescale and the terms, no branch."""
    ctype = compute_type(r_max.results[0])
    exp = exp_function(ctype)
    lines: list[str] = []
    level = list(vals)
    n = 0
    while len(level) > 1:
        nxt: list[str] = []
        for i in range(0, len(level) - 1, 2):
            lines.append(f"chunk_m{n} = {_select_max(level[i], level[i + 1])}")
            nxt.append(f"chunk_m{n}")
            n += 1
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    lines.append(f"chunk_m = {_select_max(m, level[0])}")
    zero, ninf = float_literal(0.0, ctype), float_literal(float("-inf"), ctype)
    lines.append(f"chunk_base = {zero} if chunk_m == {ninf} else chunk_m")
    terms = " + ".join(f"{exp}({v} - chunk_base)" for v in vals)
    lines += [f"{s} = {s} * {exp}({m} - chunk_base) + ({terms})", f"{m} = chunk_m"]
    return lines


def _select_max(a: str, b: str) -> str:
    """The larger of float names `a` and `b`, NaN when either is (as
    `kernel_source.max_expr`), with both tests evaluated (`|`, not `or`):
    one select, where the short-circuit `or` leaves a branch in the PTX."""
    return f"({a} if ({a} >= {b}) | math.isnan({a}) else {b})"


def split_combine_lines(r_max: nn.ReduceMaxOp, m: str, s: str, part_m: str,
                        part_s: str) -> list[str]:
    """Fold one block's partial pair (`part_m`, `part_s`: names) into the
    running pair `m`, `s` (the rule of `pair_tree_lines`)."""
    ctype = compute_type(r_max.results[0])
    return [
        f"split_m = {combine(r_max, m, part_m)}",
        f"{s} = {s} * {_factor(m, 'split_m', ctype)} + {part_s} * "
        f"{_factor(part_m, 'split_m', ctype)}",
        f"{m} = split_m",
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
