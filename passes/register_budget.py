"""The `register-budget` pass: estimate registers per thread of every group
and split or re-schedule the groups over the budget.

The estimate comes from the schedule each group's emitter will use
(`scheduling/register_model.py`): values in flight times the vector width,
addressing, reduction partials, GEMM accumulators and fragments, window
state. The budget is what keeps `occupancy` of the SM's threads resident:

    budget = registers_per_sm / (occupancy * max_threads_per_sm)   (multiple of 8)

capped by the target's per-thread limit and `max_registers`. A group over
budget is, in order:

1. re-scheduled (its kind's `GroupKind.leaner`): a contraction takes the
   largest smaller GEMM tile that fits (recorded as the group's
   `#fusion.contraction` schedule, which `tile-and-promote` starts from); a
   lone window op the first thread tile with fewer outputs per thread that
   fits (fewer output channels, then fewer pixels; recorded as its
   `#fusion.window` schedule); an attention group (`sized_for_budget`) is
   only remarked;
2. split into stages at a legal point: two groups in program order whose
   crossing values go through memory (a pointwise group anywhere, a
   contraction or window group after its anchor, a reduction group where
   only full-row values cross), recursively until every stage fits;
3. left as it is (a lone window op with its leanest thread tile,
   `GroupKind.leanest`), with a `missed:` remark saying ptxas may spill.

Every group gets `est_registers`; each decision a remark. The budget follows
the GPU, so `target` matters; `occupancy` defaults to 0.25 (16 warps per SM:
128 registers on H200, enough for the 8x8 GEMM micro-tile, and enough warps
for 4-wide vector loads to hide memory latency).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, IntegerType, ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass

from fusec.analysis.group_kind import MAX_REGISTERS_ATTR, GroupKind, Leaner, group_kind
from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.analysis.remarks import RemarkCollector
from fusec.analysis.targets import Target, resolve_target, unknown_target
from fusec.codegen.build_pool import workers_running
from fusec.codegen.kernel_probe import KernelCount, KernelProbe
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.schedule import SCHEDULE_KEY
from fusec.dialects.shapes import ShapeError, broadcast_shapes
from fusec.passes.form_fusion_groups import _build_group  # pyright: ignore[reportPrivateUsage]
from fusec.passes.register_prices import crossing_values, spill_seconds, split_seconds, us
from fusec.scheduling.conv_choice import CONV_MODES, channels_last_conv
from fusec.scheduling.gemm_choice import GEMM_MODES
from fusec.scheduling.library_plan import LibraryPlan
from fusec.scheduling.register_estimate import RegisterEstimate
from fusec.scheduling.register_model import estimate_registers

EST_ATTR = "est_registers"
REGISTER_GRANULE = 8  # registers are allocated per thread in multiples of 8
DEFAULT_OCCUPANCY = 0.25
MAX_SPLIT_DEPTH = 6  # 2^6 stages at most: past that the group is one op anyway
PTXAS_MARGIN = 0.25  # estimates this close to the budget (either side) are checked by ptxas


def register_budget(target: Target, occupancy: float, max_registers: int = 0) -> int:
    """Registers per thread that keep `occupancy` of the SM's threads resident."""
    threads = max(32, int(occupancy * target.max_threads_per_sm))
    budget = target.registers_per_sm // threads // REGISTER_GRANULE * REGISTER_GRANULE
    budget = min(budget, target.max_registers_per_thread)
    return min(budget, max_registers) if max_registers > 0 else budget


def group_name(group: GroupOp) -> str:
    attr = group.attributes.get("name")
    return attr.data if isinstance(attr, StringAttr) else "?"


def record(group: GroupOp, est: RegisterEstimate) -> None:
    """Store the estimate on the group (`est_registers`)."""
    group.attributes[EST_ATTR] = IntegerAttr(est.registers, IntegerType(64))


def recorded_estimate(group: GroupOp) -> int:
    """The `est_registers` of a group, 0 when the pass did not run."""
    attr = group.attributes.get(EST_ATTR)
    return attr.value.data if isinstance(attr, IntegerAttr) else 0


def kind_of(group: GroupOp) -> GroupKind:
    """The group's kind (a group without one is pointwise, as for
    `estimate_registers`)."""
    return group_kind(getattr(group.attributes.get("kind"), "data", "pointwise"), group)


def apply_leaner(group: GroupOp, leaner: Leaner) -> None:
    """Record `leaner`'s schedule and estimate on the group."""
    group.attributes[SCHEDULE_KEY] = leaner.schedule
    record(group, leaner.estimate)


# --- splitting -----------------------------------------------------------------------------------


def _body_ops(group: GroupOp) -> list[Operation]:
    return [op for op in group.block.ops if not isinstance(op, YieldOp)]


def _kind_of(ops: list[Operation]) -> str | None:
    """The group kind of a stage, or None when no emitter schedules it."""
    kinds = {op_kind(op) for op in ops if not isinstance(op, nn.ConstantOp)}
    anchors = [op for op in ops if op_kind(op) in (OpKind.CONTRACTION, OpKind.WINDOW)]
    if len(anchors) > 1 or (anchors and OpKind.REDUCTION in kinds):
        return None
    if anchors:
        return "contraction" if op_kind(anchors[0]) is OpKind.CONTRACTION else "window"
    if OpKind.REDUCTION in kinds:
        return "reduction"
    if kinds <= {OpKind.ELEMENTWISE, OpKind.BROADCAST}:
        return "pointwise"
    return None


def legal_splits(group: GroupOp) -> list[int]:
    """Indices k where ops[:k] and ops[k:] are both stages an emitter
    schedules and the group's kind lets the values between them cross
    (`GroupKind.may_cross_split`)."""
    ops = _body_ops(group)
    kind = kind_of(group)
    out: list[int] = []
    for k in range(1, len(ops)):
        first, rest = ops[:k], ops[k:]
        if _kind_of(first) is None or _kind_of(rest) is None:
            continue
        if all(isinstance(op, nn.ConstantOp) for op in first):
            continue
        cross = crossing_values(first, rest)
        if not kind.may_cross_split(group, cross):
            continue
        yielded = set(_yielded(group))
        first_out = [*cross, *(r for op in first for r in op.results if r in yielded)]
        rest_out = [r for op in rest for r in op.results if r in yielded]
        if not (_one_space(first, first_out) and _one_space(rest, rest_out)):
            continue
        out.append(k)
    return out


def _yielded(group: GroupOp) -> list[SSAValue]:
    last = group.block.last_op
    return list(last.operands) if isinstance(last, YieldOp) else []


def _one_space(part: list[Operation], outputs: list[SSAValue]) -> bool:
    """A pointwise stage's results must share one broadcast shape that covers
    its inputs (what the pointwise emitter iterates over); other kinds are
    checked by their anchor."""
    if _kind_of(part) != "pointwise" or not outputs:
        return True
    try:
        space = broadcast_shapes(*(tensor_shape(v) for v in outputs))
        inside = set(part)
        reads = [v for op in part for v in op.operands
                 if not (isinstance(v, OpResult) and v.op in inside)]
        if any(broadcast_shapes(tensor_shape(v), space) != space for v in reads):
            return False
    except ShapeError:
        return False
    return True


def _stage_cost(ops: list[Operation], k: int) -> int:
    """Arrays of the costlier stage of the split at k (inputs it reads plus
    values it writes for the other stage): each holds an address and its
    elements in flight, the dominant term of `register_model`'s estimate."""
    first, rest = ops[:k], ops[k:]
    cross = len(crossing_values(first, rest))

    def inputs(part: list[Operation]) -> int:
        inside = set(part)
        return len({v for op in part for v in op.operands
                    if not (isinstance(v, OpResult) and v.op in inside)})

    return max(inputs(first) + cross, inputs(rest))


def best_split(group: GroupOp) -> int | None:
    """The legal split whose costlier stage is cheapest (ties: the most
    balanced)."""
    ops = _body_ops(group)
    splits = legal_splits(group)
    if not splits:
        return None
    return min(splits, key=lambda k: (_stage_cost(ops, k), abs(2 * k - len(ops))))


def inline_group(group: GroupOp) -> list[Operation]:
    """Move the body of `group` before it (block arguments replaced by its
    operands, its results by the yielded values) and erase it."""
    block = group.parent_block()
    assert block is not None
    body = group.block
    for arg, operand in zip(body.args, group.operands, strict=True):
        arg.replace_all_uses_with(operand)
    last = body.last_op
    assert isinstance(last, YieldOp)
    for result, value in zip(group.results, last.operands, strict=True):
        result.replace_all_uses_with(value)
    ops = _body_ops(group)
    for op in ops:
        op.detach()
        block.insert_op_before(op, group)
    last.detach()
    last.erase()
    group.detach()
    group.erase()
    return ops


def _clone_constants(first: list[Operation], rest: list[Operation]) -> list[Operation]:
    """Give the second stage its own copies of the constants it reads from the first."""
    clones: list[Operation] = []
    for const in [op for op in first if isinstance(op, nn.ConstantOp)]:
        users = [(op, i) for op in rest for i, v in enumerate(op.operands)
                 if v is const.results[0]]
        if not users:
            continue
        clone = const.clone()
        clones.append(clone)
        for op, i in users:
            op.operands[i] = clone.results[0]
    return clones


def split_group(group: GroupOp, k: int) -> tuple[GroupOp, GroupOp]:
    """Replace `group` by two groups: its first `k` ops, then the rest."""
    name = group_name(group)
    block = group.parent_block()
    assert isinstance(block, Block)
    anchor = group.next_op
    assert anchor is not None
    ops = inline_group(group)
    first, rest = ops[:k], ops[k:]
    clones = _clone_constants(first, rest)
    for c in clones:
        block.insert_op_before(c, rest[0])
    rest = [*clones, *rest]
    kind_a, kind_b = _kind_of(first), _kind_of(rest)
    assert kind_a is not None and kind_b is not None
    a = _build_group(first, f"{name}_s0", kind_a)
    block.insert_op_before(a, anchor)
    b = _build_group(rest, f"{name}_s1", kind_b)
    block.insert_op_before(b, anchor)
    return a, b


# --- the pass ------------------------------------------------------------------------------------


@dataclass
class _Budgeter:
    budget: int
    remarks: RemarkCollector
    target: Target
    cap: int = 0  # `max_registers`: every kernel is declared with it
    probe: KernelProbe | None = None  # None: estimates only
    margin: float = PTXAS_MARGIN
    plan: LibraryPlan = field(default_factory=LibraryPlan)
    # by the group itself (not its id, which a group made by a split may reuse)
    _library: dict[GroupOp, bool] = field(default_factory=dict, repr=False)

    def library_bound(self, group: GroupOp) -> bool:
        """Whether a library call will compute `group` (`tile-and-promote`
        splits off and counts its epilogue then): it has no kernel of its
        own to count, re-schedule or split."""
        if group not in self._library:
            self._library[group] = channels_last_conv(group) is not None or \
                self.plan.library_bound(group, self.target)
        return self._library[group]

    def measure(self, group: GroupOp, est: RegisterEstimate) -> KernelCount | None:
        """ptxas's count of the group's kernel (under the cap), when the
        estimate alone cannot decide: under a cap, or within `margin` of the
        budget; None otherwise or when ptxas cannot be had."""
        if self.probe is None or not self.undecided(group, est):
            return None
        return self.probe.count(group, self.target, self.cap)

    def undecided(self, group: GroupOp, est: RegisterEstimate) -> bool:
        """Whether ptxas must count `group`'s kernel, of estimate `est`:
        every kernel under a cap; else one within `margin` of the budget,
        unless its kind sized it for the budget already (an attention tile:
        kept whatever ptxas says, so a count would change only a remark,
        and it is the slowest kernel to compile)."""
        if est.registers == 0 or self.library_bound(group):
            return False  # a library call has no kernel
        if self.cap:
            return True
        return not kind_of(group).sized_for_budget and \
            abs(est.registers - self.budget) <= self.margin * self.budget

    def would_measure(self, group: GroupOp) -> bool:
        """Whether `fit` will ask ptxas about `group` as it stands."""
        return self.probe is not None and \
            self.undecided(group, estimate_registers(group, self.target))

    def fit(self, group: GroupOp, depth: int = 0) -> None:
        """Estimate (and count with ptxas when it matters), then keep,
        re-schedule or split until `group` fits."""
        est = estimate_registers(group, self.target)
        record(group, est)
        if self.cap:
            group.attributes[MAX_REGISTERS_ATTR] = IntegerAttr(self.cap, IntegerType(64))
        if self.library_bound(group):
            return  # cuBLAS's or cuDNN's: tile-and-promote splits its epilogue off
        real = self.measure(group, est)
        regs = real.registers if real is not None else est.registers
        name = group_name(group)
        if regs <= self.budget and (real is None or real.spill_bytes == 0):
            if est.registers > self.budget:
                self.remarks.add("remark", f"kept group {name}: ptxas counts {regs} registers, "
                                 f"within the budget of {self.budget} ({est.summary()})")
            return
        seen = est.summary() + (f", ptxas {real.registers}" if real is not None else "")
        if self.reschedule(group, est, seen):
            return
        k = best_split(group) if depth < MAX_SPLIT_DEPTH else None
        if real is not None and regs <= self.budget and self.keep_capped(group, real, k):
            return
        if k is None:
            if (leanest := kind_of(group).leanest(group, self.target)) is not None:
                # nothing fits: the fewest registers at least
                apply_leaner(group, leanest)
                est = leanest.estimate
            self.remarks.add("missed", f"group {name} needs {est.summary()}, over the budget of "
                             f"{self.budget}, and has no legal split point: ptxas may spill")
            return
        a, b = split_group(group, k)
        why = (f"capped at {self.cap} registers it would spill {real.spill_bytes} bytes per "
               f"thread" if real is not None and real.spill_bytes and regs <= self.budget
               else f"it needs {seen}, over the budget of {self.budget} registers per thread")
        self.remarks.add("remark", f"split group {name} into {group_name(a)} and "
                         f"{group_name(b)} after op {k}: {why}")
        self.fit(a, depth + 1)
        self.fit(b, depth + 1)

    def keep_capped(self, group: GroupOp, real: KernelCount, k: int | None) -> bool:
        """Whether the capped kernel's spills cost less than splitting at `k`
        (always, when there is no split); says which in a remark."""
        name, ops = group_name(group), _body_ops(group)
        spill = spill_seconds(real, self.target)
        split = split_seconds(ops[:k], ops[k:], self.target) if k is not None else None
        if split is not None and spill > split:
            self.remarks.add("remark", f"group {name} capped at {self.cap} registers would "
                             f"spill {real.spill_bytes} bytes per thread (~{us(spill)} of "
                             f"local-memory traffic), more than a split costs (~{us(split)})")
            return False
        cheaper = (f"cheaper than a split (~{us(split)})" if split is not None
                   else "it has no legal split point")
        self.remarks.add("remark", f"kept group {name} capped at {self.cap} registers with "
                         f"{real.spill_bytes} bytes of spill per thread (~{us(spill)} of "
                         f"local-memory traffic): {cheaper}")
        return True

    def reschedule(self, group: GroupOp, est: RegisterEstimate, seen: str) -> bool:
        """A leaner schedule of the same group that fits (`GroupKind.leaner`:
        a contraction's smaller GEMM tile, a window's smaller thread tile);
        a kind `sized_for_budget` stays as it is. True when done."""
        name = group_name(group)
        kind = kind_of(group)
        if (leaner := kind.leaner(group, self.budget, self.target)) is not None:
            apply_leaner(group, leaner)
            self.remarks.add("remark", f"re-scheduled group {name}: {seen} is over "
                             f"the budget of {self.budget}; {leaner.text} needs "
                             f"{leaner.estimate.summary()}")
            return True
        if kind.sized_for_budget:
            if est.registers <= self.target.max_registers_per_thread:
                # chosen for the occupancy it leaves (an mma attention tile)
                self.remarks.add("remark", f"kept group {name} at {seen}, over the budget "
                                 f"of {self.budget}: its schedule was priced at the "
                                 "occupancy that leaves")
            else:
                self.remarks.add("missed", f"group {name} needs {seen}, over the budget of "
                                 f"{self.budget}: ptxas may spill")
            return True
        return False


@dataclass(frozen=True)
class RegisterBudgetPass(ModulePass):
    """Estimate registers per thread of each group; split or re-schedule what is over budget.

    ```mlir
    // before: 24 inputs multiplied pairwise and summed, one pointwise group
    %y = fusion.group (%a0, ..., %a23) {name = "g0", kind = "pointwise"} ...
    // after `fusec -p 'register-budget{max_registers=48}'`
    %p = fusion.group (%a0, ...) {name = "g0_s0", kind = "pointwise", est_registers = 45} ...
    %y = fusion.group (%p, ...) {name = "g0_s1", kind = "pointwise", est_registers = 41} ...
    ```

    Options: `target`, `occupancy` (fraction of the SM's threads to keep
    resident, default 0.25), `max_registers` (a hard cap, 0: none: every
    kernel is declared with it, and a group is split only when its capped
    kernel would spill more than the split costs), `ptxas` (count the
    kernels ptxas must decide: within `ptxas_margin` of the budget, or all
    under a cap; false: estimates only), `ptxas_wait` (seconds the compile
    may wait for kernels to be built and counted, default
    `PROBE_BUDGET_S`; 0: only kernels built before, in the kernel cache, are
    counted, and nothing is built), `remarks`; and `tile-and-promote`'s
    `gemm`, `library_epilogue`, `conv` and `conv_tf32`, give them the same
    values: a group whose GEMM or convolution that pass will give to cuBLAS
    or cuDNN (`scheduling/library_plan.py`) has no kernel of its own, so it
    is neither counted, built ahead, re-scheduled nor split here.
    """

    name = "register-budget"

    target: str = "h200"
    occupancy: float = DEFAULT_OCCUPANCY
    max_registers: int = 0
    ptxas: bool = True
    ptxas_margin: float = PTXAS_MARGIN
    ptxas_wait: float | None = None
    gemm: str = "auto"
    library_epilogue: bool = True
    conv: str = "auto"
    conv_tf32: bool = False
    remarks: bool = True

    def __post_init__(self) -> None:
        if self.gemm not in GEMM_MODES:
            raise ValueError(f"gemm must be one of {', '.join(GEMM_MODES)}")
        if self.conv not in CONV_MODES:
            raise ValueError(f"conv must be one of {', '.join(CONV_MODES)}")
        if not 0.0 < self.occupancy <= 1.0:
            raise ValueError("occupancy must be in (0, 1]")
        if self.max_registers < 0:
            raise ValueError("max_registers must be >= 0 (0: no cap)")
        if self.ptxas_wait is not None and not self.ptxas_wait >= 0:
            raise ValueError("ptxas_wait must be >= 0 seconds")
        if (problem := unknown_target(self.target)) is not None:
            raise ValueError(problem)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        target, _ = resolve_target(self.target)
        budget = register_budget(target, self.occupancy, self.max_registers)
        collector = RemarkCollector()
        probe = None if not self.ptxas else KernelProbe() if self.ptxas_wait is None else \
            KernelProbe(budget_s=self.ptxas_wait)
        plan = LibraryPlan(self.gemm, self.library_epilogue, self.conv, self.conv_tf32)
        budgeter = _Budgeter(budget, collector, target, self.max_registers, probe,
                             self.ptxas_margin, plan)
        groups = [g for f in op.walk() if isinstance(f, FuncOp) and f.body.blocks
                  for g in f.body.block.ops if isinstance(g, GroupOp)]
        if probe is not None:  # every count the fits will ask for, built in parallel first
            # workers running before the counts start them: a GPU compile
            # (`fusec.compile`, the torch backend), which builds every kernel
            building = workers_running()
            measured = [g for g in groups if budgeter.would_measure(g)]
            probe.prefetch(measured, target, self.max_registers)
            if building:  # the other kernels then build while the counts and
                # the rest of the compile run, instead of after it
                probe.speculate([g for g in groups if g not in measured
                                 and not budgeter.library_bound(g)], target, self.max_registers)
        for group in groups:
            budgeter.fit(group)
        if probe is not None and probe.note:
            what = "some register counts" if probe.compiled + probe.cached else \
                "register counts"
            collector.add("note", f"{what} are estimates: {probe.note}")
        if probe is not None and probe.compiled + probe.cached:
            collector.add("remark", f"register-budget: {probe.summary()}")
        if self.remarks:
            collector.store(op)
