"""Sibling reductions: reduction groups over one input shape that
`form-fusion-groups` offers to merge horizontally (one kernel, several
reduced outputs) although they read no value in common.

Vertical fusion only merges producer and consumer, and the first horizontal
sweep only the readers of one value, so two column means of different
tensors (an MoE router's `mean(one_hot)` and `mean(probs)`), or `sum(dy)` and
`sum(dy * xhat)` once `dy * xhat` sits in another group, stayed two kernels
without a remark. `sibling_pairs` lists the pairs worth judging; legality
(`fusion_legality.can_fuse`) then refuses other reduced axes, a cycle or a
loss, each with its remark.

A pair qualifies when both groups are reductions over the same shape, no
edge joins them (that pair is vertical fusion's), and they are siblings:
they share an input value or a producer group, or no path joins them at
all. Reductions joined only by a long path (the layer norms of successive
layers) are not siblings, and are left without a remark.
"""

from __future__ import annotations

from collections.abc import Mapping

from xdsl.ir import OpResult

from fusec.analysis.dependency_graph import FusionGraph
from fusec.analysis.fusion_legality import GroupInfo
from fusec.analysis.op_kinds import OpKind, op_kind


def _producers(graph: FusionGraph, g: GroupInfo) -> set[int]:
    """The nodes (constants aside) whose values `g` reads."""
    return {nid for v in g.inputs if isinstance(v, OpResult)
            and op_kind(v.op) is not OpKind.CONSTANT
            and (nid := graph.node_of.get(v.op)) is not None}


def are_siblings(graph: FusionGraph, a: GroupInfo, b: GroupInfo) -> bool:
    """`a` and `b` share an input or a producer group, or no path joins them;
    False when an edge joins them (vertical fusion judges that pair)."""
    na, nb = graph.nodes[a.nid], graph.nodes[b.nid]
    if nb.nid in na.succs or na.nid in nb.succs:
        return False
    if a.inputs & b.inputs or _producers(graph, a) & _producers(graph, b):
        return True
    return graph.cycle_witness(na, nb) is None


def sibling_pairs(graph: FusionGraph, infos: Mapping[int, GroupInfo],
                  order: Mapping[int, int]) -> list[tuple[int, int]]:
    """Pairs of reduction groups (node ids, earlier lead first by `order`,
    the program index of each group's lead) over the same shape that are
    siblings (`are_siblings`), in program order of their leads."""
    reductions = sorted((g for g in infos.values() if g.kind == "reduction"),
                        key=lambda g: order[g.nid])
    pairs = []
    for i, a in enumerate(reductions):
        for b in reductions[i + 1:]:
            if a.shape == b.shape and are_siblings(graph, a, b):
                pairs.append((a.nid, b.nid))
    return pairs
