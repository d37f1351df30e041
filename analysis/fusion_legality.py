"""Fusion legality: four separate, side-effect-free predicates.

`CanFuse = dep_ok and prec_ok and res_ok and gain_ok` (DESIGN.md). Each takes
a `Candidate` (two groups of ops and everything needed to judge them) and
returns a `Verdict` whose `reason` is a sentence a user can read:

```
cannot fuse nn.reduce_max (%m) with nn.matmul (%1): a reduction and a contraction
cannot share one kernel (no schedule computes both)
```

- `dep_ok`: the merged group has a kind an emitter schedules (pointwise,
  reduction, contraction, window), its results have the shapes that kind can
  write (several results make a multi-output group), reductions share one
  iteration space, and no path between the two runs through an outside op.
- `prec_ok`: the fused result stays within tau of the unfused one.
- `res_ok`: registers and shared memory fit the target.
- `gain_ok`: the cost model's `dT = T_mem - T_overlap - T_spill` is >= 0.

`GroupInfo` is the summary of a group these predicates read; `fuse_infos`
builds the merged summary without touching the IR.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from xdsl.ir import Operation, OpResult, SSAValue

from fusec.analysis.concat_operands import computes_pieces, concat_pieces
from fusec.analysis.cost_model import (
    FusionGain,
    KernelCost,
    elementwise_flops,
    fusion_gain,
    op_flops,
    parallel_threads,
    schedule_times,
)
from fusec.analysis.dependency_graph import DependencyAnalysis, FusionGraph
from fusec.analysis.diagnostics import counted
from fusec.analysis.group_kind import find_kind
from fusec.analysis.in_place_reads import (
    pointwise_read_refusal,
    recompute_read_refusal,
    reduction_read_refusal,
)
from fusec.analysis.library_gemm_cost import LIBRARY_PATHS, library_cost, library_element
from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.analysis.reduction_passes import (
    reduction_threads,
    row_passes,
)
from fusec.analysis.reduction_views import folded_views, reduction_view_refusal
from fusec.analysis.scheduled_cost import ScheduleCache, ScheduledKernel, scheduled_kernel
from fusec.analysis.targets import Target, get_target
from fusec.analysis.view_chains import view_chain
from fusec.analysis.view_operands import (
    CHAINED_VIEWS,
    INDEXED_READS,
    bytes_read,
    computed_ops,
    feeds_indexed_reads,
    indexed_refusal,
    view_ops,
    view_reads,
)
from fusec.dialects import nn
from fusec.dialects.element_types import skipped_rounding, tau
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import ShapeError, broadcast_shapes, fmt, numel

# Group kinds an emitter schedules; the others describe ops that stay alone.
FUSIBLE_KINDS = ("pointwise", "reduction", "contraction", "window")
VIEW_OPS = (nn.TransposeOp, nn.SliceOp, nn.ReshapeOp)
MOVING_OPS = (*VIEW_OPS, nn.GatherOp, nn.ConcatOp)
"""Ops whose result is elements of their operands, moved: kept in registers,
such a result skips no rounding (its operands' own roundings are counted
where they are kept)."""

# Registers per thread: a base per group kind (index math, the 4-wide vector
# of a pointwise thread, a GEMM's 8x8 accumulator tile plus fragments, a
# window's sliding inputs: each kind's `summary_registers`,
# `fusec/scheduling/kinds/`) plus a cost per op: the temporaries it keeps live.
# Summing per-op costs over-estimates long chains (registers get reused), so
# fusion stays on the safe side of the budget. Kinds no emitter schedules
# have their base here.
OTHER_BASE_REGISTERS: dict[str, int] = {"view": 8}
OP_REGISTERS: dict[str, int] = {
    "elementwise": 2, "transcendental": 4, "reduction": 8, "view": 1, "anchor": 0,
}
TRANSCENDENTAL = (nn.ExpOp, nn.LogOp, nn.TanhOp, nn.ErfOp, nn.SinOp, nn.CosOp, nn.SigmoidOp,
                  nn.SiluOp, nn.GeluOp, nn.PowOp, nn.DivOp, nn.SqrtOp, nn.RsqrtOp)

# tau: how far (relative) a fused result may drift from the unfused one, per
# element type of the values involved; and the unit roundoff of each type.
# Fused kernels keep intermediates in f32 registers, so every low-precision
# intermediate the fusion keeps out of memory skips one rounding. The skipped
# roundings are independent errors of at most u each, so their effect on the
# result is estimated by their root sum of squares (the probabilistic bound of
# Higham and Mary, "A new approach to probabilistic rounding error analysis",
# 2019: sqrt(n) u with high probability), not by n u: summed linearly, 13 bf16
# roundings (13 x 2^-8 > 0.05) already split a chain of 26 elementwise ops,
# whose fused result only lost roundings. Cancellation that magnifies one
# rounding (`(x + 1024) - 1024` in f16) is what `--check-precision` measures.
# Both are rows of `dialects.element_types` (`tau`, `skipped_rounding`).


@dataclass(frozen=True)
class Verdict:
    """The answer of one predicate: `ok`, and why not."""

    ok: bool
    reason: str = ""
    gain: FusionGain | None = None

    @staticmethod
    def yes(gain: FusionGain | None = None) -> Verdict:
        return Verdict(True, "", gain)

    @staticmethod
    def no(reason: str, gain: FusionGain | None = None) -> Verdict:
        return Verdict(False, reason, gain)


@dataclass(frozen=True)
class GroupInfo:
    """What legality needs to know about a group of ops."""

    nid: int
    kind: str  # a FUSIBLE_KIND, or "view", "layout", "composite", "alone", "opaque", "constant"
    lead: Operation  # the first op in program order (names the group in remarks)
    size: int
    shape: tuple[int, ...]  # the iteration space (reduction: the reduced input's shape)
    axes: tuple[int, ...] = ()  # reduction axes, normalized
    anchor: Operation | None = None  # the matmul / window op / a reduction
    outputs: frozenset[SSAValue] = frozenset()  # values read outside or returned
    inputs: frozenset[SSAValue] = frozenset()  # values read from outside
    flops: float = 0.0
    registers: int = 0
    shared: int = 0
    drift: float = 0.0  # root sum of squares of the roundings skipped by fusing
    has_never: bool = False
    note: str = ""  # why a non-fusible kind is not fusible
    ops: tuple[Operation, ...] = ()  # the members, in program order


def single_op_info(op: Operation, nid: int, dep: DependencyAnalysis,
                   target: Target | None = None) -> GroupInfo:
    """The summary of a group holding only `op` (`target`: the compile's,
    for the schedule a lone pointwise op gets; default h200)."""
    kind, shape, axes, note = _classify(op)
    inputs = frozenset(op.operands)
    outputs = [r for r in op.results if dep.consumers(r)]
    regs, shared = summary_resources(kind, (op,), inputs, outputs, shape,
                                     target or get_target("h200"), 1)
    return GroupInfo(
        nid=nid, kind=kind, lead=op, size=1, shape=shape, axes=axes,
        anchor=op if kind in ("contraction", "window", "reduction") else None,
        outputs=frozenset(outputs), inputs=inputs,
        flops=op_flops(op),
        registers=regs, shared=shared,
        has_never=_contract(op) == "never", note=note, ops=(op,),
    )


def summary_resources(kind: str, ops: tuple[Operation, ...], inputs: frozenset[SSAValue],
                      outputs: list[SSAValue], shape: tuple[int, ...], target: Target,
                      parts: int) -> tuple[int, int]:
    """(registers per thread, shared bytes per block) of a group of `kind`
    holding `ops`, from its `GroupKind` (`parts`: how many merged groups had
    that kind); a kind no emitter schedules: its base plus its ops."""
    impl = find_kind(kind)
    if impl is None:
        return OTHER_BASE_REGISTERS.get(kind, 0) + sum(map(op_registers, ops)), 0
    return (impl.summary_registers(ops, inputs, outputs, target),
            impl.summary_shared(ops, shape, parts))


def _contract(op: Operation) -> str:
    attr = op.attributes.get("fusion")
    return str(getattr(attr, "data", "")) if attr is not None else ""


def _classify(op: Operation) -> tuple[str, tuple[int, ...], tuple[int, ...], str]:
    kind = op_kind(op)
    shape = tensor_shape(op.results[0]) if op.results else ()
    if kind is OpKind.CONSTANT:
        return "constant", shape, (), "a constant is program data, not a kernel"
    if kind in (OpKind.ELEMENTWISE, OpKind.BROADCAST) and not isinstance(op, nn.BatchNormOp):
        return "pointwise", shape, (), ""
    if isinstance(op, nn.ReduceOp):
        # Any axes: the reduction schedule walks non-trailing ones as a column
        # (or strided row) layout, several passes included (scheduling/reduction_schedule.py).
        return "reduction", op.operand_shape(), op.axes, ""
    if kind is OpKind.CONTRACTION:
        return "contraction", shape, (), ""
    if isinstance(op, nn.Conv2dOp) and op.channels_last:
        # cuDNN's alone: its epilogue forms a pointwise group of its own, which
        # then also takes in what computes its per-channel operands
        return "alone", shape, (), ("a channels-last convolution is a cuDNN call alone; "
                                    "its epilogue is a kernel after it")
    if kind is OpKind.WINDOW:
        return "window", shape, (), ""
    if isinstance(op, VIEW_OPS):
        return "view", shape, (), "a layout op moves elements and runs as its own kernel"
    if kind in (OpKind.REDUCTION, OpKind.ELEMENTWISE):
        return "composite", shape, (), (
            "it is a composite kept whole (it carries a fusion contract, so decompose "
            "left it) and emitters fuse only primitives")
    if kind is OpKind.LAYOUT:
        return "layout", shape, (), "a layout op moves elements and runs as its own kernel"
    return "opaque", shape, (), "fusec does not know how to fuse it"


def op_registers(op: Operation) -> int:
    """The registers `op` adds to a group (legality's fast estimate)."""
    kind = op_kind(op)
    if kind in (OpKind.CONTRACTION, OpKind.WINDOW):
        return OP_REGISTERS["anchor"]
    if kind is OpKind.REDUCTION:
        return OP_REGISTERS["reduction"]
    if isinstance(op, VIEW_OPS):
        return OP_REGISTERS["view"]
    if isinstance(op, TRANSCENDENTAL):
        return OP_REGISTERS["transcendental"]
    return OP_REGISTERS["elementwise"]


@dataclass(frozen=True)
class FusionOptions:
    """The knobs of legality, from the pass options and the target."""

    max_registers: int  # hard per-thread limit res_ok enforces
    allow_reduced_precision: bool = False
    fold_views: bool = True
    min_gain: float = 0.0  # seconds; gain_ok wants dT >= min_gain
    low_intensity: float = 2.0
    """FLOP/byte under which a legal fusion is taken whatever dT says (a
    memory-bound kernel always gains from bytes not moved), unless it
    recomputes work."""
    high_intensity: float = 10.0
    """FLOP/byte over which a fusion is taken only when dT predicts a gain."""
    max_occupancy_drop: float = 0.2
    """res_ok refuses a fusion whose kernel keeps this fraction fewer threads
    resident (register-limited occupancy) than the worse of its parts."""
    library_gemm: bool = False
    """The library GEMM will run a contraction group whose operands it can
    read, when faster (`tile-and-promote`): price such groups that way."""
    library_epilogue: bool = True
    """Its call computes the epilogue's leading bias, residual and activation
    (`tile-and-promote{library-epilogue}`): price those as free."""
    max_recompute_flops: int = 16
    """The most flops per element (`cost_model.elementwise_flops`) a chain of
    elementwise ops recomputed in a reading group may cost (step 3 of
    form-fusion-groups, `passes/recompute_chain.py`); the gain model then
    weighs what is under it."""


@dataclass
class Candidate:
    """Two groups that might become one kernel, and the context to judge it."""

    a: GroupInfo
    b: GroupInfo
    dep: DependencyAnalysis
    graph: FusionGraph
    target: Target
    options: FusionOptions
    relation: str = "vertical"  # or "horizontal" (siblings sharing an input)
    schedules: ScheduleCache = field(default_factory=lambda: ScheduleCache())
    """Groups already scheduled for `gain_ok` (share one across candidates)."""
    _cache: dict[str, object] = field(default_factory=dict[str, object])

    def in_pair(self, op: Operation) -> bool:
        """`op` belongs to one of the two groups."""
        nid = self.graph.node_of.get(op)
        return nid == self.a.nid or nid == self.b.nid

    def edges(self, src: GroupInfo, dst: GroupInfo) -> list[SSAValue]:
        """Values produced by `src` and read by `dst` (memoized per pair)."""
        key = f"edges{src.nid}->{dst.nid}"
        if key not in self._cache:
            found = [v for v in dst.inputs if self.owner(v) == src.nid]
            self._cache[key] = sorted(found, key=self.dep.position)
        return self._cache[key]  # type: ignore[return-value]

    def owner(self, v: SSAValue) -> int | None:
        """The node producing `v` (None for a function argument)."""
        return self.graph.node_of.get(v.op) if isinstance(v, OpResult) else None

    @cached_property
    def outputs(self) -> list[SSAValue]:
        """Values the merged group must still write: read outside it or returned."""
        boundary = self.a.outputs | self.b.outputs  # only these can stay outputs
        return sorted((
            v for v in boundary
            if any(not self.in_pair(u) for u in self.dep.consumers(v))
        ), key=self.dep.position)

    @cached_property
    def fused(self) -> GroupInfo | str:
        """The merged summary, or why the two kinds cannot form one group."""
        return fuse_infos(self)


def describe_group(dep: DependencyAnalysis, g: GroupInfo) -> str:
    """`nn.exp (%2)` or `the group of nn.exp (%2) (3 ops)`."""
    if g.size == 1:
        return dep.describe(g.lead)
    return f"the group of {dep.describe(g.lead)} ({counted(g.size, 'op')})"


# --- merging two summaries (the kind algebra) ------------------------------------------------


def fuse_infos(c: Candidate) -> GroupInfo | str:
    """The merged summary if the kinds combine, else the reason they do not:
    each group's `GroupKind.merge` is asked in turn (the first group's
    first); a pair neither kind has a rule for is refused."""
    a, b = c.a, c.b
    merged: Merged | str | None = None
    impls = [(impl, mine, other) for mine, other in ((a, b), (b, a))
             if (impl := find_kind(mine.kind)) is not None]
    for impl, mine, other in impls:
        merged = impl.merge(c, mine, other)
        if merged is not None:
            break
    if merged is None and not impls:
        merged = indexed_read(c)
        merged = view_chain(c) if merged is None else merged
    if merged is None:
        merged = _kind_refusal(c)
    if isinstance(merged, str):
        return merged
    if merged[0] == "reduction":
        # what the writer reads in place, then (views folding) whether it coalesces
        refusal = _reduction_reads(c, merged) or (
            _reduction_views(c, merged) if c.options.fold_views else None)
        if refusal is not None:
            return refusal
    elif merged[0] != "pointwise":
        ops = set((*a.ops, *b.ops))
        for g in (a, b):
            held = [op for op in view_ops(g.ops) if not feeds_indexed_reads(op, ops)] if (
                g.kind == "pointwise") else []
            if held and isinstance(held[0], nn.TransposeOp):
                return (f"{describe_group(c.dep, g)} reads a transposed operand "
                        f"({c.dep.describe(held[0])}); only a pointwise kernel stages one "
                        "through its tile")
            if held:
                return (f"{describe_group(c.dep, g)} reads an operand through a layout op "
                        f"({c.dep.describe(held[0])}); only a pointwise kernel folds one "
                        "into its loads")
    return _with_totals(c, *merged)


def _reduction_reads(c: Candidate, merged: Merged) -> str | None:
    """Why the reduction writer could not read the merged group's concats,
    gathers and views in place (`analysis/in_place_reads.py`), or None."""
    ops = tuple(sorted((*c.a.ops, *c.b.ops), key=c.dep.index.__getitem__))
    found = reduction_read_refusal(ops, merged[1])
    return None if found is None else found[1]


def _reduction_views(c: Candidate, merged: Merged) -> str | None:
    """Why the merged reduction group cannot read its slices, reshapes and
    transposes in place (`analysis/reduction_views.py`), or None."""
    ops = tuple(sorted((*c.a.ops, *c.b.ops), key=c.dep.index.__getitem__))
    views = folded_views(ops)
    if not views:
        return None
    inputs = [v for v in c.a.inputs | c.b.inputs if c.owner(v) not in (c.a.nid, c.b.nid)]
    refusal = reduction_view_refusal(ops, inputs, c.outputs, merged[1], merged[2])
    if refusal is None:
        return None
    return (f"a reduction kernel would read an operand through "
            f"{c.dep.describe(views[0])}, but {refusal}")


def _kind_refusal(c: Candidate) -> str:
    for g in (c.a, c.b):
        if g.kind not in FUSIBLE_KINDS and g.kind != "view":
            return f"{c.dep.describe(g.lead)} is not fusible: {g.note}"
    for g in (c.a, c.b):
        if g.kind == "view":
            return (f"{c.dep.describe(g.lead)} is a layout op; layout ops fold only into "
                    "the operand loads of a matmul (option fold_views)")
    if c.a.kind == c.b.kind:
        return (f"both hold a {c.a.kind} op ({c.dep.describe(c.a.anchor or c.a.lead)} and "
                f"{c.dep.describe(c.b.anchor or c.b.lead)}); one kernel computes one")
    return (f"a {c.a.kind} group and a {c.b.kind} group cannot share one kernel "
            "(no schedule computes both)")


Merged = tuple[str, tuple[int, ...], tuple[int, ...], Operation | None]


def merge_pointwise(a: GroupInfo, b: GroupInfo, shape: tuple[int, ...] | None = None
               ) -> Merged | str:
    shape = shape or _covering(a.shape, b.shape)
    if shape is None:
        return f"their iteration spaces {fmt(a.shape)} and {fmt(b.shape)} do not broadcast"
    refusal = pointwise_read_refusal((*a.ops, *b.ops), shape)  # what the writer reads in place
    if refusal is not None:
        return refusal
    return ("pointwise", shape, (), None)


def view_operand(c: Candidate) -> Merged | str:
    """A transpose, slice or reshape joins the pointwise group reading it:
    the kernel reads the operand in place as a strided view
    (`analysis/transposed_operands.py`, `analysis/view_operands.py`)."""
    view, pw = (c.a, c.b) if c.a.kind == "view" else (c.b, c.a)
    if not c.edges(view, pw) or c.edges(pw, view):
        return (f"{c.dep.describe(view.lead)} reads the result of "
                f"{describe_group(c.dep, pw)}; a pointwise kernel folds a layout op only "
                "over operands it reads from memory")
    readers = [u.operation for v in c.edges(view, pw) for u in v.uses
               if c.in_pair(u.operation)]
    if all(isinstance(u, CHAINED_VIEWS) for u in readers):  # its shape is not iterated
        return merge_pointwise(view, pw, pw.shape)
    return merge_pointwise(view, pw)


def indexed_read(c: Candidate) -> Merged | str | None:
    """`_indexed_read` when views fold (option fold_views), else None: the
    rule every kind asks first (a group reading a concat or gather in place
    whatever its kind)."""
    return _indexed_read(c) if c.options.fold_views else None


def _indexed_read(c: Candidate) -> Merged | str | None:
    """A concat or gather (a lone op, or a pointwise group reading one) and
    the pointwise or reduction group reading its result, or the slices and
    reshapes feeding its operands: one kernel that reads the concat's
    operands or the gathered rows in place (`codegen/indexed_read.py`).
    None when the pair is not that pattern."""
    ops = set((*c.a.ops, *c.b.ops))
    indexed = [op for op in ops if isinstance(op, INDEXED_READS)]
    if not indexed:
        return None
    for op in indexed:
        if (reason := indexed_refusal(op, ops)) is not None:
            return reason
    if (anchored := next((g for g in (c.a, c.b) if g.kind in (
            "reduction", "contraction", "window")), None)) is not None and computes_pieces(ops):
        return (f"a {anchored.kind} kernel reads a concat in place only over operands it "
                "reads from memory; operands the kernel computes are evaluated under the "
                "concat's select by a pointwise kernel only")
    for src, dst in ((c.a, c.b), (c.b, c.a)):
        lone = src.size == 1 and isinstance(src.lead, INDEXED_READS)
        if lone and dst.kind in ("pointwise", "reduction") and c.edges(src, dst):
            if c.edges(dst, src):
                return (f"{c.dep.describe(src.lead)} reads the result of "
                        f"{describe_group(c.dep, dst)}; a kernel reads a concat or gather "
                        "in place only over operands it reads from memory")
            if dst.kind == "reduction":
                if _covering(src.shape, dst.shape) != dst.shape:
                    return (f"{c.dep.describe(src.lead)} has shape {fmt(src.shape)}, which "
                            f"does not broadcast into the reduction's rows {fmt(dst.shape)}")
                return merge_reduction(c)
            return merge_pointwise(src, dst)
        if src.kind == "view" and src.size == 1 and feeds_indexed_reads(src.lead, ops) and (
                c.edges(src, dst)) and not c.edges(dst, src):
            if dst.kind == "reduction":
                return merge_reduction(c)
            return merge_pointwise(src, dst, dst.shape)
    return computed_concat(c, ops)


def computed_concat(c: Candidate, ops: set[Operation]) -> Merged | str | None:
    """A group holding a concat (the lone op, or a pointwise group) and a
    pointwise group (or slices) computing some of its operands: one
    pointwise kernel over the concat's result that evaluates them under the
    concat's select (`analysis/concat_operands.py`). None when the pair is
    not that pattern; the reason when the producer also computes values of
    another iteration shape."""
    pieces = concat_pieces(ops)
    for holder, producer in ((c.a, c.b), (c.b, c.a)):
        concats = [op for op in holder.ops if isinstance(op, nn.ConcatOp)]
        slices = producer.kind == "view" and all(
            isinstance(op, (nn.SliceOp, nn.ReshapeOp)) for op in producer.ops)
        if not concats or holder.kind not in ("layout", "pointwise") or not (
                producer.kind == "pointwise" or slices) or c.edges(holder, producer) or not any(
                u.operation in concats for v in c.edges(producer, holder) for u in v.uses):
            continue
        if (stray := next((op for op in producer.ops if op not in pieces), None)) is not None:
            return (f"{c.dep.describe(stray)} is also read outside the operands of "
                    f"{c.dep.describe(concats[0])}; a kernel evaluates a concat's computed "
                    f"operands only under its select, at their own shape, not at "
                    f"{fmt(holder.shape)}")
        return merge_pointwise(holder, producer, holder.shape)
    return None


def _covering(s: tuple[int, ...], t: tuple[int, ...]) -> tuple[int, ...] | None:
    """The larger of two shapes when the other broadcasts into it."""
    try:
        joint = broadcast_shapes(s, t)
    except ShapeError:
        return None
    return joint if joint in (s, t) else None


def merge_reduction(c: Candidate) -> Merged | str:
    red, other = (c.a, c.b) if c.a.kind == "reduction" else (c.b, c.a)
    if other.kind == "reduction" and (other.shape, other.axes) != (red.shape, red.axes):
        return (f"the reductions cannot share one iteration space: "
                f"{c.dep.describe(other.anchor or other.lead)} reduces axes {list(other.axes)} "
                f"of {fmt(other.shape)} but {c.dep.describe(red.anchor or red.lead)} reduces "
                f"axes {list(red.axes)} of {fmt(red.shape)}")
    for src, dst in ((c.a, c.b), (c.b, c.a)):
        for v in c.edges(src, dst):
            owner = v.op if isinstance(v, OpResult) else None
            if isinstance(owner, nn.ReduceOp) and not owner.keepdims:
                return (f"{c.dep.describe(owner)} drops its reduced axes (keepdims = false), "
                        "so its readers do not broadcast back over the rows")
    if other.kind == "pointwise" and _covering(other.shape, red.shape) != red.shape:
        return (f"{describe_group(c.dep, other)} iterates over {fmt(other.shape)}, which does "
                f"not broadcast into the reduction's row space {fmt(red.shape)}")
    return ("reduction", red.shape, red.axes, red.anchor)


def epilogue(c: Candidate) -> Merged | str:
    anchor_g, ew = (c.a, c.b) if c.a.kind != "pointwise" else (c.b, c.a)
    what = anchor_g.kind
    if c.edges(ew, anchor_g):
        return (f"{describe_group(c.dep, ew)} would be a prologue of a {what} group; a "
                f"{what} loads its operands directly and fuses only an elementwise epilogue")
    if not c.edges(anchor_g, ew):
        return (f"{describe_group(c.dep, ew)} does not read the {what} result; a {what} "
                "group fuses only its own epilogue")
    if _covering(ew.shape, anchor_g.shape) != anchor_g.shape:
        return (f"{describe_group(c.dep, ew)} iterates over {fmt(ew.shape)}, not the "
                f"{what} result's {fmt(anchor_g.shape)}")
    return (what, anchor_g.shape, (), anchor_g.anchor)


def conv_pool(c: Candidate) -> Merged | str | None:
    """A convolution group (conv + elementwise epilogue) and the pool reading
    its result: one window kernel, the conv tile in shared memory
    (`codegen/conv_pool.py`). None when the pair is not that pattern; the
    reason when it is but cannot be one kernel."""
    for conv_g, pool_g in ((c.a, c.b), (c.b, c.a)):
        conv, pool = conv_g.anchor, pool_g.lead
        if not isinstance(conv, nn.Conv2dOp) or pool_g.size != 1 or not isinstance(
                pool, (nn.MaxPool2dOp, nn.AvgPool2dOp)):
            continue
        if conv_g.shape != tensor_shape(conv.results[0]) or c.edges(pool_g, conv_g):
            continue  # already pooled, or the pool feeds the conv
        if c.edges(conv_g, pool_g) == [pool.operands[0]]:
            read_outside = [v for v in c.outputs if c.owner(v) == conv_g.nid]
            if read_outside:  # the conv tile lives in shared memory only
                return (f"{c.dep.describe(conv)} is also read outside the group, and a "
                        "conv + pool kernel writes only the pooled result")
            return ("window", pool_g.shape, (), conv)
    return None


def fold_view(c: Candidate) -> Merged | str:
    view, con = (c.a, c.b) if c.a.kind == "view" else (c.b, c.a)
    if c.edges(con, view) or not c.edges(view, con):
        return (f"{c.dep.describe(view.lead)} does not feed an operand of "
                f"{c.dep.describe(con.anchor or con.lead)}; only operand views fold")
    for v in view.outputs:
        readers = c.dep.consumers(v)
        outside = [u for u in readers if not c.in_pair(u)]
        if outside:
            return (f"{c.dep.describe(view.lead)} is also read by "
                    f"{c.dep.describe(outside[0])} outside the group; a folded view must "
                    "feed only the matmul's operand load")
        if any(u is not con.anchor and not isinstance(u, VIEW_OPS) for u in readers):
            return (f"{c.dep.describe(view.lead)} feeds the epilogue, not an operand of "
                    f"{c.dep.describe(con.anchor or con.lead)}")
    return ("contraction", con.shape, (), con.anchor)


def _with_totals(c: Candidate, kind: str, shape: tuple[int, ...], axes: tuple[int, ...],
                 anchor: Operation | None) -> GroupInfo:
    a, b = c.a, c.b
    inputs = frozenset(v for v in a.inputs | b.inputs if c.owner(v) not in (a.nid, b.nid))
    outputs = frozenset(c.outputs)
    # a layout op's, gather's or concat's result is its operands' elements
    # moved: keeping it in registers skips no rounding
    internalized = [v for v in a.outputs | b.outputs if v not in outputs
                    and not (isinstance(v, OpResult) and isinstance(v.op, MOVING_OPS))]
    drift = math.hypot(a.drift, b.drift,
                       *(skipped_rounding(c.dep.dtype(v)) for v in internalized))
    lead = a.lead if c.dep.index[a.lead] <= c.dep.index[b.lead] else b.lead
    ops = tuple(sorted((*a.ops, *b.ops), key=c.dep.index.__getitem__))
    regs, shared = summary_resources(kind, ops, inputs, list(outputs), shape, c.target,
                                     sum(g.kind == kind for g in (a, b)))
    pieces = concat_pieces(ops) if kind == "pointwise" else set[Operation]()
    return GroupInfo(
        nid=a.nid, kind=kind, lead=lead, size=a.size + b.size, shape=shape, axes=axes,
        anchor=anchor, outputs=outputs, inputs=inputs,
        flops=_fused_flops(a, b, kind, shape, pieces),
        registers=regs, shared=shared, drift=drift, ops=ops,
    )


def _fused_flops(a: GroupInfo, b: GroupInfo, kind: str, shape: tuple[int, ...],
                 pieces: set[Operation]) -> float:
    """Pointwise ops of a smaller shape fused into a larger iteration space
    are recomputed at every point: scale their flops up (not those of a
    concat's operands, `pieces`: each is evaluated on its own elements)."""
    total = 0.0
    for g in (a, b):
        if g.kind == "pointwise" and kind == "pointwise" and g.shape != shape and not (
                pieces.issuperset(g.ops)):
            total += g.flops * numel(shape) / max(1, numel(g.shape))
        else:
            total += g.flops
    return total


# --- the four predicates -------------------------------------------------------------------------


def dep_ok(c: Candidate) -> Verdict:
    """Dependencies: contracts, a kind the emitters schedule, result shapes
    that kind can write, one iteration space, and no cycle."""
    for g in (c.a, c.b):  # a `fusion = "never"` op stays alone
        if g.has_never:
            return Verdict.no(f'{c.dep.describe(g.lead)} has fusion = "never"')
    fused = c.fused
    if isinstance(fused, str):
        return Verdict.no(fused)
    if (bad := _bad_output(c, fused)) is not None:
        return Verdict.no(bad)
    witness = c.graph.cycle_witness(c.graph.nodes[c.a.nid], c.graph.nodes[c.b.nid])
    if witness is not None:  # the merged kernel would run both before and after it
        return Verdict.no(
            f"merging would create a cycle through {c.dep.describe(witness)}, which "
            "reads one group and feeds the other")
    return Verdict.yes()


def _bad_output(c: Candidate, fused: GroupInfo) -> str | None:
    """A result the merged kind cannot write (multi-output groups write
    results of the iteration shape; a reduction also its reduced values)."""
    allowed = writable_shapes(fused)
    for v in c.outputs:
        if tensor_shape(v) not in allowed:
            owner = v.op if isinstance(v, OpResult) else None
            reader = next(u for u in c.dep.consumers(v) if not c.in_pair(u))
            name = c.dep.describe(owner) if owner is not None else c.dep.names.get(v, "%?")
            return (f"{name} is also read by {c.dep.describe(reader)} outside the group, and a "
                    f"{fused.kind} group's results must have shape {fmt(fused.shape)}, not "
                    f"{fmt(tensor_shape(v))}")
    return None


def writable_shapes(g: GroupInfo) -> set[tuple[int, ...]]:
    """The shapes of the results group `g` can write: its iteration shape,
    and a reduction's reduced shapes (with and without the reduced axes)."""
    allowed = {g.shape}
    if g.kind == "reduction":
        allowed.add(tuple(1 if i in g.axes else d for i, d in enumerate(g.shape)))
        allowed.add(tuple(d for i, d in enumerate(g.shape) if i not in g.axes))
    return allowed


def prec_ok(c: Candidate) -> Verdict:
    """Precision: a narrowing cast must not feed an accumulation in the same
    kernel, and the roundings the fusion skips must stay within tau."""
    fused = c.fused
    if c.options.allow_reduced_precision or isinstance(fused, str):
        return Verdict.yes()
    for src, dst in ((c.a, c.b), (c.b, c.a)):
        for v in c.edges(src, dst):
            owner = v.op if isinstance(v, OpResult) else None
            if not isinstance(owner, nn.CastOp) or not skipped_rounding(c.dep.dtype(v)):
                continue
            name = c.dep.dtype(v)
            for reader in c.dep.consumers(v):
                if c.in_pair(reader) and op_kind(reader) in (OpKind.REDUCTION, OpKind.CONTRACTION):
                    return Verdict.no(
                        f"{c.dep.describe(owner)} rounds to {name} and feeds the accumulation "
                        f"of {c.dep.describe(reader)}; fused, the sum would see unrounded "
                        "values (set allow_reduced_precision to fuse anyway)")
    outs = [c.dep.dtype(v) for v in c.outputs] or ["f32"]
    # A float output may drift by its type's tau. A boolean or integer output
    # has no tolerance (check-precision compares them exactly too): a `cmp`
    # or cast of a drifted value can flip outright, so any drift refuses.
    tolerance = {n: tau(n) for n in outs}
    worst = min(tolerance, key=tolerance.__getitem__)
    bound = tolerance[worst]
    if fused.drift > bound:
        exact = "" if bound else " (booleans and integers must match exactly)"
        return Verdict.no(
            f"keeping low-precision intermediates in registers changes the result by up to "
            f"{fused.drift:.2g}, more than tau = {bound:g} for {worst}{exact}")
    return Verdict.yes()


def res_ok(c: Candidate) -> Verdict:
    """Resources: estimated registers per thread and shared memory per block."""
    fused = c.fused
    if isinstance(fused, str):
        return Verdict.no(fused)
    if fused.registers > c.options.max_registers:
        return Verdict.no(
            f"the fused kernel needs about {fused.registers} registers per thread, over the "
            f"limit of {c.options.max_registers} on {c.target.name}")
    # The kernels formed here declare their tiles as static shared arrays.
    if fused.shared > c.target.static_shared_limit:
        return Verdict.no(
            f"the fused kernel needs {fused.shared} bytes of shared memory per block, over "
            f"{c.target.static_shared_limit} on {c.target.name}")
    # Against the worse part: an epilogue does not make a GEMM "lose" the
    # occupancy a lone pointwise kernel would have had.
    before = min(occupancy(c.target, g) for g in (c.a, c.b))
    after = occupancy(c.target, fused)
    # More registers rather than a split: up to the target's register_budget
    # the SM keeps enough warps to hide memory latency, so a drop there is
    # free; past it the drop is refused only when it costs more time (the
    # fused body slowed by before/after) than the split's extra traffic and
    # launches (T_mem).
    if fused.registers <= c.target.register_budget:
        return Verdict.yes()
    fused_cost = group_cost(c, fused, c.outputs)
    gain = fusion_gain(c.target, group_cost(c, c.a), group_cost(c, c.b), fused_cost)
    loss = fused_cost.body_time(c.target) * (before / max(after, 1e-9) - 1.0)
    if after < (1.0 - c.options.max_occupancy_drop) * before and loss > gain.t_mem:
        return Verdict.no(
            f"fusing lowers occupancy from {before:.0%} to {after:.0%} of the SM's threads "
            f"(~{occupancy_registers(fused)} registers per thread), more than the "
            f"{c.options.max_occupancy_drop:.0%} allowed (max_occupancy_drop)")
    return Verdict.yes()


def occupancy_registers(g: GroupInfo) -> int:
    """Registers per thread for the occupancy rule: the group's estimate (a
    pointwise group's tracks ptxas: `pointwise_group_registers`)."""
    return g.registers


def occupancy(target: Target, g: GroupInfo) -> float:
    """Fraction of the SM's threads resident when registers are the limit
    (allocated in units of 8 per thread)."""
    regs = -(-max(1, occupancy_registers(g)) // 8) * 8
    return min(1.0, target.registers_per_sm / (regs * target.max_threads_per_sm))


def gain_ok(c: Candidate) -> Verdict:
    """Gain: the cost model says the fused kernel is at least as fast, each
    side priced under the schedule the scheduler would give it."""
    fused = c.fused
    if isinstance(fused, str):
        return Verdict.no(fused)
    fused_cost = group_cost(c, fused, c.outputs)
    a_cost, b_cost = group_cost(c, c.a), group_cost(c, c.b)
    gain = fusion_gain(c.target, a_cost, b_cost, fused_cost)
    times = schedule_times(c.target, a_cost, b_cost, fused_cost)
    if times.slower:  # judged on the kernels that will be emitted, before any override
        return Verdict.no(f"the fused kernel is estimated slower than its parts: "
                          f"{times.summary()}{_schedule_lines(c, fused)}", gain)
    if fused_cost.path in LIBRARY_PATHS and \
            fused_cost.launches >= a_cost.launches + b_cost.launches:
        # cuBLAS runs the elementwise ops as a second kernel re-reading C: kept
        # apart, they may still fuse with their other neighbours (a softmax)
        return Verdict.no("the library GEMM would run these ops as a separate epilogue "
                          "kernel: fusing them into its group saves nothing", gain)
    intensity = fused.flops / max(1, fused_cost.bytes_moved)
    recomputes = fused.flops > c.a.flops + c.b.flops
    if gain.delta < c.options.min_gain:
        if intensity < c.options.low_intensity and not recomputes:
            note = (f"arithmetic intensity {intensity:.2g} FLOP/byte < "
                    f"{c.options.low_intensity:g}: fused whenever legal")
            return Verdict.yes(dataclasses.replace(gain, note=note))
        if intensity > c.options.high_intensity:
            return Verdict.no(
                f"arithmetic intensity {intensity:.3g} FLOP/byte > {c.options.high_intensity:g} "
                f"fuses only with a predicted gain, and the cost model predicts none: "
                f"{gain.summary()}", gain)
        return Verdict.no(f"the cost model predicts no gain: {gain.summary()}", gain)
    return Verdict.yes(gain)


def _schedule_lines(c: Candidate, fused: GroupInfo) -> str:
    """`; fused schedule: ...; parts: ... and ...` (the lines `choose`
    returns), or nothing when a side has no scheduled kernel."""
    lines = [k.line if (k := scheduled(c, g, out, always=True)) is not None else None
             for g, out in ((fused, c.outputs), (c.a, None), (c.b, None))]
    if any(line is None for line in lines):
        return ""
    return f"; fused schedule: {lines[0]}; parts: {lines[1]} and {lines[2]}"


def scheduled(c: Candidate, g: GroupInfo, outputs: list[SSAValue] | None = None,
              always: bool = False) -> ScheduledKernel | None:
    """The kernel `g` becomes under the schedule its kind's `choose` would
    pick on the candidate's target (`analysis/scheduled_cost.py`, cached on
    the candidate); None where the kind has no scheduler or, unless
    `always`, where it says its summary prices it (`priced_by_schedule`)."""
    impl = find_kind(g.kind)
    if impl is None or not (always or impl.priced_by_schedule(g)):
        return None
    outs = sorted(g.outputs, key=c.dep.position) if outputs is None else outputs
    return scheduled_kernel(g.kind, g.ops, outs, c.target, c.schedules)


def group_cost(c: Candidate, g: GroupInfo, outputs: list[SSAValue] | None = None) -> KernelCost:
    """The kernel cost of a group: distinct inputs read, results written,
    priced under the schedule the scheduler would give it (threads, kernels
    and path: `scheduled`);
    a contraction the library GEMM can read at the library's cost when that
    is lower (`options.library_gemm`, `analysis/library_gemm_cost.py`)."""
    cost = kernel_cost(c.dep, c.target, g, outputs)
    if cost.launches and (k := scheduled(c, g, outputs)) is not None:
        cost = dataclasses.replace(cost, parallel=k.parallel, launches=k.launches, path=k.path)
    if not (c.options.library_gemm and cost.path == "simt_gemm"):
        return cost
    element = library_element(g.ops, g.inputs)
    if element is None:
        return cost
    library = library_cost(g.ops, g.inputs, g.outputs if outputs is None else outputs,
                           c.dep.nbytes, element, c.target, c.options.library_epilogue)
    return library if library.busy_time(c.target) < cost.busy_time(c.target) else cost


def kernel_cost(dep: DependencyAnalysis, target: Target, g: GroupInfo,
                outputs: list[SSAValue] | None = None) -> KernelCost:
    """`group_cost` without a candidate: what a program's estimate sums."""
    if g.size == 1 and isinstance(g.lead, nn.ReshapeOp):
        return KernelCost(0, 0.0, 1, 0, launches=0)  # a view of its input's buffer
    if outputs is None:
        outputs = list(g.outputs)
    # inputs read through slices are priced by the bytes the views cover
    computed = computed_ops(set(g.ops))
    moved = sum(bytes_read(g.ops, v, dep.nbytes(v), computed) for v in g.inputs) + sum(
        map(dep.nbytes, outputs))
    row = numel(tuple(g.shape[i] for i in g.axes)) if g.kind == "reduction" else 0
    threads = parallel_threads(g.kind, g.shape, row, target)
    if g.kind == "reduction":
        threads = _reduction_threads(target, g, outputs, threads)
    return KernelCost(moved, g.flops, threads, g.registers, path=kernel_path(g))


def _reduction_threads(target: Target, g: GroupInfo, outputs: list[SSAValue],
                       threads: int) -> int:
    """The threads the reduction schedule will run: split rows fill the GPU,
    a multi-pass group holds a block per few rows (`reduction_passes`)."""
    passes = row_passes(g.ops, outputs, g.axes, len(g.shape))
    block = min(target.max_threads_per_block, target.registers_per_sm // target.register_budget)
    return reduction_threads(passes, g.shape, g.axes, block, target.max_resident_threads, threads)


def kernel_path(g: GroupInfo) -> str:
    """The kernel `g` becomes (a key of `cost_model.KERNEL_PATHS`), as its
    `GroupKind.kernel_path` says the scheduler will schedule it; "roofline"
    for a kind no emitter schedules."""
    impl = find_kind(g.kind)
    return impl.kernel_path(g) if impl is not None else "roofline"


def recompute_ok(dep: DependencyAnalysis, chain: Sequence[Operation], host: GroupInfo,
                 target: Target, options: FusionOptions, saves_write: bool,
                 unwritten: Iterable[SSAValue] = (), new_outputs: Iterable[SSAValue] = (),
                 available: Iterable[SSAValue] = ()) -> Verdict:
    """Recompute the elementwise ops `chain` (in program order; the last
    defines the value `host` reads) inside `host` instead of writing and
    re-reading their results? Legal when the host schedules elementwise ops
    of their shapes and the registers fit; wanted when the bytes saved
    outweigh the recomputed flops and new input bytes. Saved: every chain
    result `host` read; with `saves_write` (the first reader judged) also the
    writes of `unwritten`, less those of `new_outputs` (leaves the chain's
    group now writes for the readers). `available`: values `host` already
    computes (earlier clones), read for free."""
    for op in chain:
        if host.kind not in FUSIBLE_KINDS or _covering(
                tensor_shape(op.results[0]), host.shape) != host.shape:
            return Verdict.no(f"{describe_group(dep, host)} cannot evaluate "
                              f"{dep.describe(op)} over {fmt(host.shape)}")
    earlier = [v.op for v in available if isinstance(v, OpResult)]
    if (refusal := recompute_read_refusal(host.kind, (*host.ops, *earlier, *chain),
                                          host.outputs, dep.index)) is not None:
        return Verdict.no(refusal)  # the writer would refuse the group with the clones
    if host.registers + sum(map(op_registers, chain)) > options.max_registers:
        return Verdict.no(f"it would take the kernel past {options.max_registers} registers")
    if not options.allow_reduced_precision and (
            refusal := _recompute_precision(dep, chain, host)) is not None:
        return Verdict.no(refusal)
    results = {op.results[0] for op in chain}
    leaves = {v for op in chain for v in op.operands if v not in results}
    new_inputs = leaves - set(host.inputs) - set(available)
    saved = sum(dep.nbytes(v) for v in results if v in host.inputs)
    if saves_write:
        saved += sum(map(dep.nbytes, set(unwritten))) - sum(map(dep.nbytes, set(new_outputs)))
    saved -= sum(map(dep.nbytes, new_inputs))
    flops = sum(op_flops(op, numel(host.shape)) for op in chain)
    t_mem, t_overlap = saved / target.memory_bandwidth, flops / target.fp32_flops
    gain = FusionGain(t_mem, t_overlap, 0.0, saved, 0)
    if gain.delta <= options.min_gain:
        return Verdict.no(f"recomputing costs more than it saves: {gain.summary()}", gain)
    return Verdict.yes(gain)


def _recompute_precision(dep: DependencyAnalysis, chain: Sequence[Operation],
                         host: GroupInfo) -> str | None:
    """`prec_ok`'s rules for a chain recomputed in `host`: a narrowing cast
    must not feed the host's accumulation, and the rounding of the value
    `host` no longer reads back must keep its results within tau."""
    if host.kind in ("reduction", "contraction"):
        for op in chain:
            if isinstance(op, nn.CastOp) and skipped_rounding(dep.dtype(op.results[0])):
                return (f"{dep.describe(op)} rounds to {dep.dtype(op.results[0])} and "
                        f"{describe_group(dep, host)} accumulates; recomputed there, the sum "
                        "would see unrounded values (set allow_reduced_precision to recompute "
                        "anyway)")
    drift = math.hypot(host.drift, skipped_rounding(dep.dtype(chain[-1].results[0])))
    bound = min((tau(dep.dtype(v)) for v in host.outputs), default=tau("f32"))
    if drift > bound:
        return (f"reading it unrounded changes the result by up to {drift:.2g}, more than "
                f"tau = {bound:g}")
    return None


def recompute_in_view_ok(dep: DependencyAnalysis, chain: Sequence[Operation],
                         hosts: list[GroupInfo], target: Target, options: FusionOptions,
                         cloned: Sequence[Iterable[Operation]] = ()) -> Verdict:
    """Recompute the elementwise ops of `chain` (program order; the last
    defines the value the hosts read) in `hosts`, its only readers, each
    reading the value through chains of layout ops (a layout copy,
    `analysis/view_chains.py`, a lone slice, or a pointwise group's views),
    at the elements their views read? `recompute_ok`'s rule over all of
    them: the value is no longer written, each host reads the chain's
    operands where it read the value (a broadcast operand whole), and the
    chain is evaluated once per element each view reads. Views that
    overlap (two slices sharing rows) evaluate it twice there: that
    duplicated work may cost at most `max_recompute_flops` per element of
    the value. `cloned`: per host, the ops it recomputes already."""
    value = chain[-1].results[0]
    extra_registers = sum(map(op_registers, chain))
    if any(h.registers + extra_registers > options.max_registers for h in hosts):
        return Verdict.no(f"it would take a kernel past {options.max_registers} registers")
    for host, earlier in zip(hosts, list(cloned) or [()] * len(hosts), strict=True):
        refusal = recompute_read_refusal(host.kind, (*host.ops, *earlier, *chain),
                                         host.outputs, dep.index)
        if refusal is not None:  # the writer would refuse the group with the clone
            return Verdict.no(refusal)
    total, elements = dep.nbytes(value), max(1, numel(tensor_shape(value)))
    inside = set(chain)
    operands = {v for op in chain for v in op.operands if v.owner not in inside}
    per_element = sum(map(elementwise_flops, chain))
    saved, evaluations = total, 0
    for host in hosts:
        computed = computed_ops(set(host.ops))
        read = bytes_read(host.ops, value, total, computed)
        saved += read - sum(read * dep.nbytes(v) // max(1, total) if tensor_shape(v) == (
            tensor_shape(value)) else dep.nbytes(v) for v in operands)
        # once per element a view reads, or per point of the host's iteration
        # space where the view's result broadcasts into it (a [C] vector)
        evaluations += sum(max(numel(w.shape), numel(host.shape))
                           for w in view_reads(host.ops, value, computed) or ())
    duplicated = per_element * max(0, evaluations - elements) / elements
    if duplicated > options.max_recompute_flops:
        return Verdict.no(f"its views read elements more than once: the chain would be "
                          f"recomputed at {duplicated:.3g} flops per element beyond one "
                          f"evaluation, over max_recompute_flops = "
                          f"{options.max_recompute_flops}")
    flops = per_element * evaluations
    gain = FusionGain(saved / target.memory_bandwidth, flops / target.fp32_flops, 0.0, saved, 1)
    if gain.delta <= options.min_gain:
        return Verdict.no(f"recomputing costs more than it saves: {gain.summary()}", gain)
    return Verdict.yes(gain)


def can_fuse(c: Candidate) -> Verdict:
    """All four predicates in order; the first refusal wins, and an accepted
    verdict carries the gain (gain_ok runs last)."""
    verdict = Verdict.yes()
    for predicate in (dep_ok, prec_ok, res_ok, gain_ok):
        verdict = predicate(c)
        if not verdict.ok:
            return verdict
    return verdict
