"""The chain of elementwise ops a reader group recomputes instead of reading
a value another group writes (`form-fusion-groups`, step 3).

A group `source` writes `root`'s result only because other groups read it.
Each reader can instead evaluate `root` itself, and with it every elementwise
op of `source` that `root` reads, back to *leaves* the reader can read: values
from outside `source` (its inputs), values `source` keeps writing anyway, and
values of a smaller shape `source` can write cheaply (a reduction's result,
`mean` of a row group, or `rsqrt(var + eps)` computed from it: one value per
row, broadcast back at every point). Layer-norm backward's `xc = x - mean;
xhat = xc * rstd` is such a chain: the row-mean kernel recomputes both from
`x`, `mean` and `rstd` instead of reading `xhat` back.

The chain is refused when it costs more than `max_recompute_flops` per
element (the cost model's per-op flops), or when it would need a value
`source` computes but cannot write; `recompute_ok` then prices what is left.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation, OpResult, SSAValue

from fusec.analysis.cost_model import elementwise_flops
from fusec.analysis.dependency_graph import DependencyAnalysis
from fusec.analysis.fusion_legality import GroupInfo, writable_shapes
from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.dialects.nn_base import tensor_shape


@dataclass(frozen=True)
class RecomputeChain:
    """Ops of `source` a reader recomputes, and what `source` writes after."""

    ops: tuple[Operation, ...]
    """In program order; the last defines the value the readers read."""
    unwritten: frozenset[SSAValue]
    """Results of `ops` `source` no longer writes once every reader recomputes them."""
    new_outputs: frozenset[SSAValue]
    """Leaves `source` computes and must now write for the readers."""

    def describe(self, dep: DependencyAnalysis) -> str:
        """`nn.sub (%xc), nn.mul (%xh)`."""
        return ", ".join(dep.describe(op) for op in self.ops)


def recomputable(op: Operation) -> bool:
    """An elementwise op without a `fusion = "never"` contract."""
    attr = op.attributes.get("fusion")
    return op_kind(op) is OpKind.ELEMENTWISE and len(op.results) == 1 and (
        getattr(attr, "data", "") != "never")


def recompute_chain(dep: DependencyAnalysis, source: GroupInfo, root: Operation,
                    kept: frozenset[SSAValue], max_flops: int) -> RecomputeChain | str:
    """The chain ending at `root` (an op of `source`), or why it is refused.

    `kept`: values of `source` that stay written whatever the readers do (a
    function result, a value a group other than the readers reads): a chain
    stops there and reads them. An elementwise op of a shape `source` can
    write that is smaller than its iteration space (a per-row statistic) is
    a leaf too: one value per row is cheaper to write than to recompute per
    point. Any other value of `source` is recomputed."""
    members, writable = set(source.ops), writable_shapes(source)
    chain, leaves, stack = {root}, set[SSAValue](), [root]
    while stack:
        for v in stack.pop().operands:
            q = v.op if isinstance(v, OpResult) and v.op in members else None
            if q is None or q in chain:
                continue
            shape = tensor_shape(v)
            if v in kept or (shape in writable and shape != source.shape) or not (
                    recomputable(q)):
                leaves.add(v)
            else:
                chain.add(q)
                stack.append(q)
    ops = tuple(sorted(chain, key=dep.index.__getitem__))
    described = ", ".join(dep.describe(op) for op in ops)
    cost = sum(map(elementwise_flops, ops))
    if cost > max_flops:
        return (f"the chain {described} costs {cost:g} flops per element, over "
                f"max_recompute_flops = {max_flops}")
    new_outputs = {v for v in leaves if isinstance(v, OpResult) and v.op in members
                   and v not in source.outputs}
    for v in sorted(new_outputs, key=dep.position):
        if tensor_shape(v) not in writable or op_kind(v.op) not in (
                OpKind.ELEMENTWISE, OpKind.REDUCTION):
            return (f"the chain {described} reads {dep.describe(v.op)}, which "
                    f"{'its group' if len(members) > 1 else 'it'} computes but does not write")
    results = {op.results[0] for op in ops}
    return RecomputeChain(ops, frozenset(results & source.outputs - kept),
                          frozenset(new_outputs))
