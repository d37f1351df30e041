"""The register-resident row schedule of `codegen/reduction.py`.

When a row is short enough (`ReductionOptions.register_elems` elements per
lane at most), each lane loads its elements of the row once and keeps them,
and every value computed from them, in registers until the row is written:

```python
# element e of this lane is j<e> = lane + e * lanes (consecutive lanes read
# consecutive addresses: one coalesced 128-byte request per warp and element)
a0_0 = in0[c0 * uint32(4096) + j0]
a0_1 = in0[c0 * uint32(4096) + j1]
acc0 = (a0_0 if a0_0 >= a0_1 or math.isnan(a0_0) else a0_1)  # pass 1: a tree
...                             # lanes combined (reduction_tree.block_combine_lines)
v2_0 = math.exp(a0_0 - res0)    # pass 2 reuses a0_0: no second read, no shared row cache
```

The element loop is unrolled when the kernel text is written, so the compiler
sees straight-line code: every load of pass 1 can be in flight at once, and
values live in named registers rather than a local array that a run-time
index would push to local memory. A value computed in one pass is reused by
the later ones (one `PointEvaluator` per element lives across all passes), so
a layer norm reads `x + r` from registers for its centred squares and its
output, exactly as the IR orders the arithmetic (two-pass mean and variance,
no sum-of-squares cancellation; the second pass costs registers, not memory).

Under a vector schedule (`vector = V`, 4 or 8, `codegen/reduction_vector.py`)
the elements come in quads of V: element `e = Vq + v` is `j<e> = jq<q> + v`
with `jq<q> = V * (lane + q * lanes)`, one load per quad and input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fusec.codegen.point_evaluator import PointEvaluator
from fusec.codegen.reduction_index import RowIndex
from fusec.codegen.reduction_tree import combine
from fusec.dialects import nn

# An accumulate term: (value expression, guard or "" when always valid).
Term = tuple[str, str]


class RowElements:
    """The unrolled elements of one lane's share of its row: their indices,
    coordinates and one persistent evaluator each."""

    def __init__(
        self,
        count: int,
        lanes: int,
        row_length: int,
        ix: RowIndex,
        make_evaluator: Callable[[int, list[str]], PointEvaluator],
        coords: Sequence[str],
        vector: int = 1,
    ) -> None:
        self.count = count
        self.lanes = lanes
        self.vector = vector
        self.row_length = row_length
        self.ix = ix
        self.setup: list[list[str]] = []
        self.guards: list[str] = []
        self.evaluators: list[PointEvaluator] = []
        for e in range(count):
            lines, guard = self._index_lines(e)
            element_coords = list(coords)
            if len(ix.reduce_dims) == 1:
                element_coords[ix.reduce_dims[0]] = f"j{e}"
            else:  # several collapsed coordinates: divided out once, per element
                names = [f"j{e}c{i}" for i in ix.reduce_dims]
                lines += ix.unravel_lines(f"j{e}", ix.reduce_shape, names)
                for i, n in zip(ix.reduce_dims, names, strict=True):
                    element_coords[i] = n
            self.setup.append(lines)
            self.guards.append(guard)
            self.evaluators.append(make_evaluator(e, element_coords))
        self._emitted = [False] * count

    def _index_lines(self, e: int) -> tuple[list[str], str]:
        """`j<e>` (clamped into the row when the last elements overhang it)
        and the guard of a clamped element ("" when it is always inside)."""
        ix = self.ix
        if self.vector > 1:
            return self._quad_index_lines(e)
        offset = ix.lit(e * self.lanes)
        if (e + 1) * self.lanes <= self.row_length:
            return [f"j{e} = {ix.itype}(lane + {offset})"], ""
        return [
            f"jr{e} = {ix.itype}(lane + {offset})",
            f"ok{e} = jr{e} < {ix.lit(self.row_length)}",
            f"j{e} = min(jr{e}, {ix.lit(self.row_length - 1)})",
        ], f"ok{e}"

    def _quad_index_lines(self, e: int) -> tuple[list[str], str]:
        """`j<e>` of a vector row: quad `q = e // vector` starts at `jq<q>`
        (named by its first element, clamped to the row's last quad when it
        overhangs: the row length is a multiple of `vector`)."""
        ix, vec = self.ix, self.vector
        q, v = divmod(e, vec)
        overhang = (q + 1) * vec * self.lanes > self.row_length
        guard = f"okq{q}" if overhang else ""
        lines = [f"j{e} = {ix.itype}(jq{q} + {ix.lit(v)})"]
        if v:
            return lines, guard
        start = f"lane * {ix.lit(vec)} + {ix.lit(q * vec * self.lanes)}"
        if not overhang:
            return [f"jq{q} = {ix.itype}({start})", *lines], ""
        return [
            f"jqr{q} = {ix.itype}({start})",
            f"okq{q} = jqr{q} < {ix.lit(self.row_length)}",
            f"jq{q} = min(jqr{q}, {ix.lit(self.row_length - vec)})",
            *lines,
        ], guard

    def index_lines(self, e: int) -> list[str]:
        """Element `e`'s index and coordinates, the first time it is visited."""
        if self._emitted[e]:
            return []
        self._emitted[e] = True
        return self.setup[e]


def accumulate_lines(r: nn.ReduceOp, acc: str, identity: str, terms: Sequence[Term]) -> list[str]:
    """`acc = <pairwise tree of the always-valid terms>`, then the guarded
    terms one by one: a tree keeps the adds independent (the compiler may
    not reassociate floating-point arithmetic itself)."""
    plain = [v for v, g in terms if not g]
    lines, top = _tree(r, acc, plain) if plain else ([], identity)
    if top != acc:
        lines.append(f"{acc} = {top}")
    for v, g in terms:
        if g:
            lines += [f"if {g}:", f"    {acc} = {combine(r, acc, v)}"]
    return lines


def _tree(r: nn.ReduceOp, acc: str, values: list[str]) -> tuple[list[str], str]:
    """The lines and the expression of a pairwise tree over `values`. Sums
    nest; a max or min names each pair (`acc0_1_0`: level 1, pair 0), since
    its NaN-propagating expression repeats its operands; the root is `acc`."""
    lines: list[str] = []
    named = isinstance(r, nn.ReduceMaxOp | nn.ReduceMinOp)
    level = 0
    while len(values) > 1:
        pairs = [combine(r, values[i], values[i + 1]) for i in range(0, len(values) - 1, 2)]
        if named:
            names = [acc] if len(values) == 2 else [f"{acc}_{level}_{i}" for i in range(len(pairs))]
            lines += [f"{n} = {p}" for n, p in zip(names, pairs, strict=True)]
            pairs = names
        else:
            pairs = [f"({p})" for p in pairs]
        values = pairs + values[len(values) - len(values) % 2:]
        level += 1
    return lines, values[0]

