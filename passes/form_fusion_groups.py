"""The `form-fusion-groups` pass: wrap ops that should run as one kernel in
`fusion.group`s.

Four layers, each usable alone (STYLE.md, after MLIR Linalg fusion):

1. legality: `analysis/fusion_legality.py` (`dep_ok`, `prec_ok`, `res_ok`, `gain_ok`);
2. the mechanical rewrite: `materialize_groups` below, in numbered steps;
3. policy: `analysis/fusion_policy.py` (candidate order, wanted or not);
4. this pass, which only wires them together and records a remark per decision.

Only groups of two or more ops are formed here; `group-each-op` wraps what is
left. Constants stay outside (a group reads them as operands, like any other
value); a reshape stays outside as a view unless it lies on a view chain
folded into a matmul's operand load. Attributes `dep.*` of
`dependency-analysis` are removed: they describe the program before grouping.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.passes import ModulePass

from fusec.analysis.candidate_group import build_group, detached_group, group_outputs
from fusec.analysis.dependency_graph import (
    DependencyAnalysis,
    FusionGraph,
    functions,
    strip_dep_attributes,
)
from fusec.analysis.diagnostics import op_error
from fusec.analysis.fusion_legality import (
    FUSIBLE_KINDS,
    Candidate,
    FusionOptions,
    GroupInfo,
    Verdict,
    can_fuse,
    describe_group,
    op_registers,
    recompute_in_view_ok,
    recompute_ok,
    single_op_info,
)
from fusec.analysis.fusion_policy import POLICIES, FusionPolicy, get_policy
from fusec.analysis.in_place_reads import group_read_refusal
from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.analysis.remarks import RemarkCollector, format_bytes
from fusec.analysis.scheduled_cost import ScheduleCache
from fusec.analysis.targets import Target, resolve_target, unknown_target
from fusec.analysis.view_operands import CHAINED_VIEWS
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp
from fusec.passes.recompute_chain import RecomputeChain, recomputable, recompute_chain
from fusec.passes.sibling_reductions import sibling_pairs
from fusec.scheduling import gemm_choice
from fusec.scheduling.gemm_choice import GEMM_MODES


@dataclass
class _Pending:
    """A decision whose text waits for the final group names."""

    severity: str
    subject: str  # the absorbed side, described when the decision was made
    other: Operation  # an op of the other side; its final group names the target
    detail: str


class GroupFormer:
    """Forms the groups of one function (layer 4's loop over candidates)."""

    def __init__(self, func: FuncOp, target: Target, policy: FusionPolicy,
                 options: FusionOptions) -> None:
        self.dep = DependencyAnalysis(func)
        self.graph = FusionGraph(self.dep)
        self.target, self.policy, self.options = target, policy, options
        self.info: dict[int, GroupInfo] = {
            nid: single_op_info(n.ops[0], nid, self.dep, target)
            for nid, n in self.graph.nodes.items()
        }
        self.pending: list[_Pending] = []
        self.schedules: ScheduleCache = {}  # groups gain_ok scheduled, by (kind, ops, outputs)
        self.settled: set[tuple[int, int]] = set()  # pairs refused for good
        self.clones: dict[int, list[Operation]] = {}  # host node -> ops it recomputes
        self.dropped: set[Operation] = set()  # recomputed by all their readers: no kernel
        self.must = [op for op in self.dep.ops if _contract(op) == "must"]
        self.refusals: dict[Operation, list[str]] = {op: [] for op in self.must}
        self.judged: set[tuple[int, int, int, int]] = set()  # horizontal pairs tried

    # --- candidates ---------------------------------------------------------------

    def candidate(self, a: int, b: int, relation: str = "vertical") -> Candidate:
        return Candidate(self.info[a], self.info[b], self.dep, self.graph, self.target,
                         self.options, relation, self.schedules)

    def try_fuse(self, c: Candidate) -> bool:
        """Judge one candidate; merge and remark, or remark why not."""
        verdict = can_fuse(c)
        if isinstance(c.fused, str) or c.a.has_never or c.b.has_never:
            # the kinds (or a contract) refuse: growing either group will not help
            self.settled.add((c.a.nid, c.b.nid))
        if verdict.ok:
            verdict = self.policy.wants(c, verdict)
        # The absorbed side names the remark: the smaller group; among equals
        # the one without a reduction/matmul/window, then the later one.
        small, big = sorted((c.a, c.b), key=lambda g: (
            g.size, g.kind in ("reduction", "contraction", "window"), -self.dep.index[g.lead]))
        subject = describe_group(self.dep, small)
        if not verdict.ok:
            view = next((g for g in (c.a, c.b) if g.size == 1 and isinstance(g.lead, nn.ReshapeOp)
                         and g.kind == "view"), None)
            other = c.b if view is c.a else c.a
            if view is not None and c.edges(view, other):
                # no kernel to miss: the reader takes the reshaped buffer as it is
                self.pending.append(_Pending("in-place", self.dep.describe(view.lead),
                                             other.lead, ""))
            else:
                self.pending.append(_Pending("missed", subject, big.lead, verdict.reason))
            for op in self.must:
                if self.graph.node_of[op] in (c.a.nid, c.b.nid):
                    self.refusals[op].append(verdict.reason)
            return False
        fused = c.fused
        assert isinstance(fused, GroupInfo) and verdict.gain is not None
        node = self.graph.merge(self.graph.nodes[c.a.nid], self.graph.nodes[c.b.nid])
        del self.info[c.a.nid], self.info[c.b.nid]
        self.info[node.nid] = dataclasses.replace(fused, nid=node.nid)
        gain = verdict.gain
        launches = f"{gain.saved_launches} launch" + ("es" if gain.saved_launches != 1 else "")
        detail = f"saves {format_bytes(gain.saved_bytes)} and {launches} ({gain.summary()})"
        self.pending.append(_Pending("remark", subject, big.lead, detail))
        return True

    def run(self) -> None:
        """Vertical fusion op by op in program order, horizontal, then
        recomputation of cheap values other groups read."""
        for op in self.dep.ops:
            if op in self.dep.live:  # dead code is not fusion's business
                self._vertical(op)
        if self.policy.horizontal:
            self._horizontal()
            self._sibling_reductions()
        for nid in [n for n, g in self.info.items() if g.size > 1]:
            for v in sorted(self.info[nid].outputs, key=self.dep.position):
                self._recompute(nid, v)
        for node in list(self.graph.ordered_nodes()):
            if node.ops[0] in self.dep.live:
                self._recompute_in_views(node.nid)

    def _recompute_in_views(self, nid: int) -> None:
        """Recompute node `nid`, a chain of elementwise ops (one op, or a
        pointwise group like `mul -> relu`) that writes one value, in the
        groups that read that value only through slices, reshapes and
        transposes (layout copies, a lone slice, or pointwise or reduction
        groups reading views; each then evaluates the chain at the elements
        its views read, from the chain's operands), so that no kernel writes
        the value for them to read back."""
        ops = sorted(self.graph.nodes[nid].ops, key=self.dep.index.__getitem__)
        if nid in self.clones or not all(recomputable(op) for op in ops):
            return  # (a node recomputing another's ops would have to pass them on)
        outside = [(r, u) for op in ops for r in op.results for u in self.dep.consumers(r)
                   if self.graph.node_of.get(u, nid) != nid  # (func.return has no node)
                   and op not in self.clones.get(self.graph.node_of[u], ())]
        written = list(dict.fromkeys([*(r for op in ops for r in op.results
                                         if self.dep.is_output(r)), *(r for r, _ in outside)]))
        readers = list(dict.fromkeys(u for _, u in outside))
        hosts = list(dict.fromkeys(self.graph.node_of[u] for u in readers))
        if not hosts or not any(self._view_host(self.graph.node_of[u], u) for u in readers):
            return  # no chain of layout ops reads it
        value, subject = written[0], ", ".join(self.dep.describe(op) for op in ops)
        first = self.graph.nodes[hosts[0]].ops[0]
        refusal = self._kept_written(written, readers)
        if refusal is not None:
            self.pending.append(_Pending("not-recomputed", subject, first, refusal))
            return
        if not all(self._view_host(h, u) for h, u in zip(
                map(self.graph.node_of.__getitem__, readers), readers, strict=True)):
            return  # a single layout op is no chain: it stays a copy of the buffer
        chain = [op for op in ops if op is not value.owner] + [value.owner]  # type: ignore[list-item]
        infos = [self.info[h] for h in hosts]
        verdict = recompute_in_view_ok(self.dep, chain, infos, self.target, self.options,
                                       [self.clones.get(h, []) for h in hosts])
        if not verdict.ok or verdict.gain is None:
            self.pending.append(_Pending("not-recomputed", subject, first, verdict.reason))
            return
        for h in hosts:  # (a host may recompute the chain's first ops already)
            cloned = self.clones.setdefault(h, [])
            cloned += [op for op in chain if op not in cloned]
        self.dropped.update(ops)
        detail = (f"saves {format_bytes(verdict.gain.saved_bytes)} and 1 launch "
                  f"({verdict.gain.summary()})")
        self.pending += [_Pending("recomputed", subject, self.graph.nodes[h].ops[0], detail)
                         for h in hosts]

    def _view_host(self, h: int, reader: Operation) -> bool:
        """Whether `reader`, an op of node `h`, reads through a chain of
        layout ops a kernel can evaluate a recomputed chain under: a view
        of a pointwise, reduction or layout-chain group, or a lone slice
        (whose copy kernel then evaluates the chain where it reads)."""
        info = self.info[h]
        if not isinstance(reader, CHAINED_VIEWS):
            return False
        if info.size == 1:
            return isinstance(reader, nn.SliceOp)
        return info.kind in ("view", "pointwise", "reduction")

    def _kept_written(self, written: list[SSAValue], readers: list[Operation]) -> str | None:
        """Why a chain whose `written` values `readers` read must keep
        writing them, or None: it writes one value, read only by the views."""
        if len(written) > 1 or self.dep.is_output(written[0]):
            kept = next((v for v in written if self.dep.is_output(v)), written[0])
            where = "a result of the function" if self.dep.is_output(kept) else "read elsewhere"
            return (f"{self.dep.describe(kept.owner)} is also {where}; a chain is "  # type: ignore[arg-type]
                    "recomputed where views read it only when it writes nothing else")
        other = next((u for u in readers if not isinstance(u, CHAINED_VIEWS)), None)
        if other is not None:
            return (f"it is also read by {self.dep.describe(other)}, which reads it whole: its "
                    "kernel writes it anyway, and the views read it back for less than "
                    "recomputing it")
        return None

    def _recompute(self, nid: int, v: SSAValue) -> None:
        """Recompute the elementwise op defining `v`, with the chain of
        elementwise ops of its group it reads (`passes/recompute_chain.py`),
        in every group that reads it, so that its group no longer writes it,
        when all of them gain. Only an op that stays useful in its own group
        qualifies; the clones read values defined before the readers."""
        p = v.op if isinstance(v, OpResult) else None
        if p is None or not recomputable(p) or self.dep.is_output(v):
            return
        readers = self.dep.consumers(v)
        hosts = list(dict.fromkeys(self.graph.node_of[u] for u in readers))
        if nid not in hosts or len(hosts) < 2 or any(
                self.info[h].size < 2 for h in hosts if h != nid) or any(
                op_kind(u) in (OpKind.CONTRACTION, OpKind.WINDOW) for u in readers):
            return
        kept = self._kept(nid, hosts)
        hosts = [h for h in hosts if h != nid and p not in self.clones.get(h, ())]
        if not hosts:
            return  # every reader recomputes it already, with an earlier chain
        chain = recompute_chain(self.dep, self.info[nid], p, kept,
                                self.options.max_recompute_flops)
        subject = chain.describe(self.dep) if isinstance(chain, RecomputeChain) else (
            self.dep.describe(p))
        verdicts = [] if isinstance(chain, str) else [
            (h, recompute_ok(self.dep, ops, self.info[h], self.target, self.options,
                             k == 0, chain.unwritten, chain.new_outputs, self._cloned(h)))
            for k, (h, ops) in enumerate((h, self._uncloned(h, chain)) for h in hosts)]
        for h, verdict in verdicts or [(hosts[0], Verdict.no(str(chain)))]:
            if not verdict.ok:
                self.pending.append(_Pending("not-recomputed", subject,
                                             self.graph.nodes[h].ops[0], verdict.reason))
                return
        assert isinstance(chain, RecomputeChain)
        for h, verdict in verdicts:
            assert verdict.gain is not None
            ops = self._uncloned(h, chain)
            self.clones.setdefault(h, []).extend(ops)
            self.info[h] = dataclasses.replace(  # later chains see these registers taken
                self.info[h], registers=self.info[h].registers + sum(map(op_registers, ops)))
            detail = f"saves {format_bytes(verdict.gain.saved_bytes)} ({verdict.gain.summary()})"
            self.pending.append(_Pending("recomputed", subject, self.graph.nodes[h].ops[0],
                                         detail))

    def _kept(self, nid: int, hosts: list[int]) -> frozenset[SSAValue]:
        """Results of node `nid` that stay written whatever `hosts` recompute:
        function results and values a node other than those reads."""
        readers = set(hosts)
        return frozenset(w for w in self.info[nid].outputs if self.dep.is_output(w) or any(
            self.graph.node_of[u] not in readers for u in self.dep.consumers(w)))

    def _uncloned(self, h: int, chain: RecomputeChain) -> tuple[Operation, ...]:
        """The ops of `chain` node `h` does not recompute yet."""
        return tuple(op for op in chain.ops if op not in self.clones.get(h, ()))

    def _cloned(self, h: int) -> frozenset[SSAValue]:
        """The values node `h` already recomputes."""
        return frozenset(op.results[0] for op in self.clones.get(h, ()))

    def _vertical(self, op: Operation) -> None:
        """Let `op`'s group absorb its producers' groups, best first, until
        no producer group can join (each merge may expose new producers)."""
        tried: set[tuple[int, int, int, int]] = set()
        while True:
            g = self.graph.node_of[op]
            kind = self.info[g].kind
            if kind not in FUSIBLE_KINDS and kind != "view" and not self._concat_host(g):
                return
            cands = [  # a layout op absorbs only the layout ops it reads (one chain)
                self.candidate(p, g) for p in self.graph.nodes[g].preds
                if self.info[p].kind != "constant" and (p, g) not in self.settled
                and (kind != "view" or self.info[p].kind == "view")
                and (kind != "layout" or self.info[p].kind == "pointwise")
                and (p, g, self.info[p].size, self.info[g].size) not in tried
            ]
            for c in cands:
                tried.add((c.a.nid, c.b.nid, c.a.size, c.b.size))
            ranked = self.policy.order(cands)
            if kind == "pointwise":
                ranked.sort(key=lambda c: self._strands_readers(op, c.a))
            if not any(self.try_fuse(c) for c in ranked):
                return

    def _concat_host(self, nid: int) -> bool:
        """Whether node `nid` is a lone concat, which absorbs the pointwise
        groups computing its operands (`fusion_legality.computed_concat`)."""
        info = self.info[nid]
        return self.options.fold_views and info.size == 1 and isinstance(info.lead, nn.ConcatOp)

    def _strands_readers(self, op: Operation, producer: GroupInfo) -> bool:
        """`producer` is a reduction group over another iteration space than
        every reduction reading `op`'s result: joined to it, `op` could not
        feed those readers in registers (they cannot join that group), so
        `_vertical` tries such a producer last. Layer-norm backward's
        `dy * gamma * xhat` joining the column sums instead of its row mean
        left the row mean a kernel of its own reading it back."""
        spaces = {(u.operand_shape(), u.axes) for r in op.results
                  for u in self.dep.consumers(r) if isinstance(u, nn.ReduceOp)}
        return producer.kind == "reduction" and bool(spaces) and (
            (producer.shape, producer.axes) not in spaces)

    def _horizontal(self) -> None:
        """Siblings reading the same value become one multi-output group."""
        values: list[SSAValue] = [*self.dep.block.args]
        values += [r for op in self.dep.ops for r in op.results]
        for v in values:
            readers = [u for u in self.dep.consumers(v) if u in self.dep.live]
            if len(readers) < 2:
                continue
            first = readers[0]
            for other in readers[1:]:
                a, b = self.graph.node_of[first], self.graph.node_of[other]
                if a == b or (a, b) in self.settled or not {
                        self.info[a].kind, self.info[b].kind} <= {"pointwise", "reduction"}:
                    continue
                self.judged.add(self._pair_key(a, b))
                self.try_fuse(self.candidate(a, b, "horizontal"))

    def _pair_key(self, a: int, b: int) -> tuple[int, int, int, int]:
        """A pair of groups as they are now (a merge changes a size)."""
        a, b = sorted((a, b))
        return (a, b, self.info[a].size, self.info[b].size)

    def _sibling_reductions(self) -> None:
        """Reduction groups over one shape that are siblings but read no
        common value (`passes/sibling_reductions.py`) become one kernel
        with several reduced outputs when legal and worth it; each pair is
        judged once as it stands, so a refused one keeps one remark."""
        while True:
            order = {nid: self.dep.index[g.lead] for nid, g in self.info.items()}
            cands = []
            for a, b in sibling_pairs(self.graph, self.info, order):
                if self._pair_key(a, b) not in self.judged and (a, b) not in self.settled \
                        and (b, a) not in self.settled:
                    cands.append(self.candidate(a, b, "horizontal"))
            if not cands:
                return
            for c in self.policy.order(cands):
                self.judged.add(self._pair_key(c.a.nid, c.b.nid))
                if self.try_fuse(c):
                    break  # the merged group has new pairs: list them again
            else:
                return

    # --- results --------------------------------------------------------------------

    def group_names(self) -> dict[int, str]:
        """`g0`, `g1`, ... for every node of two or more ops, in final order."""
        multi = [n.nid for n in self.graph.ordered_nodes() if (
            len(n.ops) > 1 or n.nid in self.clones) and not self.dropped.issuperset(n.ops)]
        return {nid: f"g{i}" for i, nid in enumerate(multi)}

    def render_remarks(self, names: dict[int, str], collector: RemarkCollector) -> None:
        """Turn the pending decisions into remark lines with final names,
        each line once (the same refusal met again through another reader
        of the same group says nothing new)."""
        seen: set[tuple[str, str, int, str]] = set()
        for p in self.pending:
            nid = self.graph.node_of[p.other]
            if (p.severity, p.subject, nid, p.detail) in seen:
                continue
            seen.add((p.severity, p.subject, nid, p.detail))
            if p.severity == "in-place":
                reader = f"group {names[nid]}" if nid in names else self.dep.describe(p.other)
                collector.add("remark", f"{p.subject} stays a view of its operand's buffer, "
                              f"read in place by {reader} (a reshape moves no data: no kernel)")
            elif p.severity == "remark" and nid not in names:  # recomputed by its readers
                collector.add("remark", f"fused {p.subject} with {self.dep.describe(p.other)}: "
                              f"{p.detail}")
            elif p.severity == "remark":
                collector.add("remark", f"fused {p.subject} into group {names[nid]}: {p.detail}")
            elif p.severity == "recomputed":
                collector.add("remark", f"recomputed {p.subject} in group {names[nid]} instead "
                              f"of writing it: {p.detail}")
            elif p.severity == "not-recomputed":
                host = f"group {names[nid]}" if nid in names else self.dep.describe(p.other)
                collector.add("missed", f"{p.subject} not recomputed in {host}: {p.detail}")
            elif nid in names:
                collector.add("missed",
                              f"{p.subject} not fused into group {names[nid]}: {p.detail}")
            else:
                collector.add("missed", f"{p.subject} not fused with "
                              f"{self.dep.describe(p.other)}: {p.detail}")

    def check_contracts(self) -> None:
        """`fusion = "must"`: the op has to share its kernel with a neighbour."""
        for op in self.must:
            node = self.graph.node(op)
            if len(node.ops) > 1 or node.nid in self.clones:
                continue
            reasons = list(dict.fromkeys(self.refusals[op]))
            why = "; ".join(reasons) if reasons else "no producer or consumer could take it"
            raise op_error(op, f'{self.dep.describe(op)} has fusion = "must" but was not '
                           f"fused with a neighbour: {why}")


def _contract(op: Operation) -> str:
    attr = op.attributes.get("fusion")
    return attr.data if isinstance(attr, StringAttr) else ""


# --- layer 2: the mechanical rewrite ------------------------------------------------------------


def materialize_groups(former: GroupFormer, names: dict[int, str],
                       collector: RemarkCollector | None = None) -> None:
    """Rewrite the function body so that every multi-op node is a `fusion.group`.

    1. walk the nodes in the graph's topological order; erase a node every
       reader recomputes (`_recompute_in_views`);
    2. move a single op that recomputes nothing to the end of the body
       (before `func.return`);
    3. wrap a node of several ops into a group (`_build_group`), unless the
       code writer of its kind could not emit it (`_unemittable`): then
       move its ops, one kernel each, like single ops;
    so the body ends up in an order where every use follows its definition.
    """
    block = former.dep.block
    terminator = block.last_op
    assert terminator is not None
    extra = _clone_recomputed(former)
    for node in list(former.graph.ordered_nodes()):
        if former.dropped.issuperset(node.ops):
            # every reader computes it (`_recompute_in_views`): the last op first
            for op in sorted(node.ops, key=former.dep.index.__getitem__, reverse=True):
                op.detach()
                op.erase()
            continue
        if len(node.ops) == 1 and node.nid not in extra:
            op = node.ops[0]
            op.detach()
            block.insert_op_before(op, terminator)
            continue
        ops = [*extra.get(node.nid, []), *sorted(node.ops, key=former.dep.index.__getitem__)]
        kind = former.info[node.nid].kind
        # a chain of layout ops (`analysis/view_chains.py`) is one layout copy
        kind = "layout" if kind == "view" else kind
        if (reason := _unemittable(ops, kind)) is not None:
            if collector is not None:
                collector.add("missed", f"group {names[node.nid]} split into one kernel per "
                              f"op before code generation: {reason}")
            for op in ops:
                if op.parent is not None:  # a recomputed clone has none yet
                    op.detach()
                block.insert_op_before(op, terminator)
            continue
        group = _build_group(ops, names[node.nid], kind)
        block.insert_op_before(group, terminator)


def _unemittable(ops: list[Operation], kind: str) -> str | None:
    """Why the code writer of `kind` would refuse a group of `ops` (in
    program order), or None. Legality asks the same predicates
    (`analysis/in_place_reads.py`) before every merge and recomputation,
    so this only catches a decision that went around them: the compile
    then makes more kernels instead of failing."""
    with detached_group(ops, kind) as trial:  # the group as it would be built
        found = group_read_refusal(trial)
    return None if found is None else found[1]


def _clone_recomputed(former: GroupFormer) -> dict[int, list[Operation]]:
    """Clone each recomputed op for its host group (in decision order, so
    a chain's clones read earlier clones) and point the host's reads of the
    original values at the clones."""
    extra: dict[int, list[Operation]] = {}
    for nid, producers in former.clones.items():
        members = former.graph.nodes[nid].ops
        mapping: dict[SSAValue, SSAValue] = {}  # a chain's clones read each other
        for p in producers:
            clone = p.clone(value_mapper=mapping)
            clone.results[0].name_hint = p.results[0].name_hint
            mapping[p.results[0]] = clone.results[0]
            extra.setdefault(nid, []).append(clone)
        for op in members:
            for i, v in enumerate(op.operands):
                if v in mapping:
                    op.operands[i] = mapping[v]
    return extra


def _build_group(ops: list[Operation], name: str, kind: str) -> GroupOp:
    """Wrap `ops` (in program order) into one `fusion.group`.

    1. inputs: values the ops read from outside, in first-use order;
    2. outputs: values read outside the group or returned;
    3. move the ops into a block whose arguments stand for the inputs
       (`analysis/candidate_group.build_group`), ending in `fusion.yield`
       of the outputs;
    4. point every outside use of an output at the group's result.
    """
    members = set(ops)
    outputs = group_outputs(ops)
    outside_uses = {r: [u for u in r.uses if u.operation not in members] for r in outputs}
    group = build_group(ops, outputs, name, kind)
    for k, r in enumerate(outputs):
        for use in outside_uses[r]:
            use.operation.operands[use.index] = group.outputs[k]
    return group


# --- layer 4: the pass ----------------------------------------------------------------------------


@dataclass(frozen=True)
class FormFusionGroupsPass(ModulePass):
    """Fuse ops into `fusion.group`s (pointwise, reduction, contraction, window).

    ```mlir
    // before (after decompose)
    %m = nn.reduce_max %x {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
    %d = nn.sub %x, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    %e = nn.exp %d : tensor<4x8xf32>
    // after `fusec -p form-fusion-groups`
    %e = fusion.group (%x) {name = "g0", kind = "reduction"}
        : (tensor<4x8xf32>) -> tensor<4x8xf32> {
    ^bb0(%x_1: tensor<4x8xf32>):
      %m = nn.reduce_max %x_1 {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
      %d = nn.sub %x_1, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
      %e_1 = nn.exp %d : tensor<4x8xf32>
      fusion.yield %e_1 : tensor<4x8xf32>
    }
    ```

    Options: `target` (a profile of analysis/targets.py, or `auto`), `policy`
    (analysis/fusion_policy.py), `max_registers` (per-thread limit, 0: the
    target's), `allow_reduced_precision`, `fold_views` (fold transpose/slice/
    reshape chains into matmul operand loads, and transposes, slices and
    reshapes of values read from memory into the
    pointwise group reading it), `remarks` (store the
    `fusion.remarks` list on the module), `low_intensity` / `high_intensity`
    (FLOP/byte: under the first a legal fusion is taken whatever dT says,
    over the second only with a predicted gain), `max_occupancy_drop` (refuse
    a fusion that keeps this fraction fewer threads resident, default 0.2),
    `gemm` (`tile-and-promote`'s: with `library`, or `auto` when the library
    is available, a contraction group the library GEMM can read is priced as
    the library runs it when that is cheaper, so that folding a view into
    its operands, or an epilogue it would run as a second kernel, is
    weighed against it), `library_epilogue` (`tile-and-promote`'s: the
    epilogue ops the library call computes are priced as free),
    `max_recompute_flops` (the most flops per element a chain of
    elementwise ops recomputed in a reading group may cost; 0 recomputes
    nothing).
    """

    name = "form-fusion-groups"

    target: str = "h200"
    policy: str = "greedy"
    max_registers: int = 0
    allow_reduced_precision: bool = False
    fold_views: bool = True
    remarks: bool = True
    low_intensity: float = 2.0
    high_intensity: float = 10.0
    max_occupancy_drop: float = 0.2
    gemm: str = "auto"
    library_epilogue: bool = True
    max_recompute_flops: int = FusionOptions.max_recompute_flops

    def __post_init__(self) -> None:
        # Caught at pipeline parsing, so a typo fails before any work is done.
        if self.policy not in POLICIES:
            raise ValueError(f"unknown policy '{self.policy}'; expected one of "
                             + ", ".join(POLICIES))
        if (problem := unknown_target(self.target)) is not None:
            raise ValueError(problem)
        if self.max_registers < 0:
            raise ValueError("max_registers must be >= 0 (0: the target's limit)")
        if self.gemm not in GEMM_MODES:
            raise ValueError(f"gemm must be one of {', '.join(GEMM_MODES)}")
        if self.max_recompute_flops < 0:
            raise ValueError("max_recompute_flops must be >= 0")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        target, note = resolve_target(self.target)
        policy = get_policy(self.policy)
        options = FusionOptions(
            max_registers=self.max_registers or target.max_registers_per_thread,
            allow_reduced_precision=self.allow_reduced_precision,
            fold_views=self.fold_views,
            low_intensity=self.low_intensity,
            high_intensity=self.high_intensity,
            max_occupancy_drop=self.max_occupancy_drop,
            library_gemm=self.gemm == "library"
            or (self.gemm == "auto" and gemm_choice.library_available()),
            library_epilogue=self.library_epilogue,
            max_recompute_flops=self.max_recompute_flops,
        )
        collector = RemarkCollector()
        if note:  # shown with --remarks only, not stored in the IR or the report
            collector.announce("note", note)
        strip_dep_attributes(op)
        for func in functions(op):
            former = GroupFormer(func, target, policy, options)
            former.run()
            names = former.group_names()
            former.render_remarks(names, collector)
            former.check_contracts()
            materialize_groups(former, names, collector)
        if self.remarks:
            collector.store(op)
