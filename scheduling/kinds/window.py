"""The window kind: a convolution or pool with its elementwise epilogue, a
tiled kernel (`scheduling/window_schedule.py`), or a conv with the pool
reading it in one kernel (`codegen/conv_pool.py`)."""

from __future__ import annotations

from xdsl.ir import OpResult

from fusec.analysis.fusion_legality import (
    Candidate,
    GroupInfo,
    Merged,
    conv_pool,
    describe_group,
    epilogue,
    indexed_read,
)
from fusec.analysis.group_kind import Choice, Leaner, ScheduleContext
from fusec.analysis.scheduled_cost import ScheduledKernel
from fusec.analysis.targets import Target
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import ScheduleAttr, WindowSchedule
from fusec.scheduling.contraction_schedule import GemmTile
from fusec.scheduling.conv_pool_tile import POOL_TILE, shared_tile
from fusec.scheduling.kinds.common import body_ops, group_name
from fusec.scheduling.kinds.over_budget import SplitOverBudget
from fusec.scheduling.kinds.summary import SummaryResources
from fusec.scheduling.register_estimate import RegisterEstimate
from fusec.scheduling.register_model import window_estimate, window_group_estimate
from fusec.scheduling.schedule_cost import window_kernel
from fusec.scheduling.window_plan import (
    TiledWindow,
    WindowPlan,
    check_plan,
    plan_attr,
)
from fusec.scheduling.window_prologue import window_prologue
from fusec.scheduling.window_schedule import (
    deeper_plans,
    fit_shared,
    group_window,
    shrink_steps,
    smallest,
    thread_tiles_below,
)

BASE_REGISTERS = 40
"""Legality's base registers of a window thread (its sliding inputs)."""
SHARED_BYTES = 4 * (16 + 3) * (16 + 3) * 4
"""Legality's shared bytes: a 16x16 output tile plus a 3-pixel halo, 4
channels at a time."""
POOLS = (nn.MaxPool2dOp, nn.AvgPool2dOp)


class WindowKind(SplitOverBudget, SummaryResources):
    """`kind = "window"`."""

    name = "window"
    base_registers = BASE_REGISTERS
    shared_bytes = SHARED_BYTES

    def merge(self, c: Candidate, mine: GroupInfo, other: GroupInfo) -> Merged | str | None:
        """A concat or gather read in place first; then the pointwise
        prologue computing the input (`scheduling/window_prologue.py`), the
        pointwise epilogue reading the result, or the pool reading a conv's
        (a conv without a prologue: that kernel reads its input directly)."""
        if (indexed := indexed_read(c)) is not None:
            return indexed
        if other.kind == "pointwise":
            if c.edges(other, mine) and not c.edges(mine, other):
                return window_prologue(c, mine, other)
            return epilogue(c)
        if other.kind == "window":
            if (with_prologue := next((g for g in (mine, other) if _has_prologue(g)),
                                      None)) is not None:
                return (f"{describe_group(c.dep, with_prologue)} evaluates a prologue on its "
                        "input; a conv + pool kernel reads its input directly")
            return conv_pool(c)
        return None

    def kernel_path(self, info: GroupInfo) -> str:
        """The tiled kernel, or the conv + pool kernel (a direct loop over
        channels and taps) when the group holds a pool after its conv."""
        pooled = isinstance(info.anchor, nn.Conv2dOp) and any(
            isinstance(op, POOLS) for op in info.ops)
        return "conv_pool" if pooled else "window_tiled"

    def choose(self, ctx: ScheduleContext, group: GroupOp) -> Choice:
        """conv + pool its pooled tile; a lone conv or pool the tiled plan
        shrunk until it fits the limit."""
        ops = body_ops(group)
        pool = next((o for o in ops if isinstance(o, POOLS)), None)
        if pool is not None and any(isinstance(o, nn.Conv2dOp) for o in ops):
            ch, cw = shared_tile(pool)
            attr = plan_attr(WindowPlan(POOL_TILE, POOL_TILE, 1, 1, 1, 1), "conv_pool")
            return (attr, f"conv + pool: a {ch}x{cw} conv tile (with halo) in shared memory "
                    f"per {POOL_TILE}x{POOL_TILE} pooled outputs, each conv output a direct "
                    "loop over input channels and taps", ch * cw * 4)
        start = group_window(group)
        assert start is not None
        tiled = fit_shared(start, ctx.limit, ctx.target)
        if tiled is None:
            tiled = smallest(start)
            ctx.remarks.add("missed", f"group {group_name(group)}: no window tile fits "
                            f"{ctx.limit} bytes of shared memory; using the smallest, "
                            f"{tiled.plan.text()} ({tiled.shared_bytes} bytes)")
        elif tiled != start:
            limit = min(ctx.limit, ctx.target.static_shared_limit)
            ctx.remarks.add("remark", f"group {group_name(group)}: window tile "
                            f"{start.plan.text()} needs {start.shared_bytes} bytes of shared "
                            f"memory, over the limit of {limit}; "
                            f"using {tiled.plan.text()} ({tiled.shared_bytes} bytes)")
        return plan_attr(tiled.plan, tiled.mode), tiled.describe(), tiled.shared_bytes

    def priced_by_schedule(self, info: GroupInfo) -> bool:
        """Yes: the tiled plan's grid, or the conv + pool kernel's direct loop."""
        return True

    def scheduled_kernel(self, ctx: ScheduleContext, group: GroupOp,
                         attr: ScheduleAttr | None) -> ScheduledKernel:
        """The tiled plan's grid x block, or conv + pool's outputs (`schedule_cost`)."""
        return window_kernel(group, attr)

    def candidates(self, group: GroupOp, first: ScheduleAttr, target: Target,
                   limit: int) -> list[ScheduleAttr]:
        """A lone conv or pool: the plan's shrink steps, smaller thread
        tiles and (depthwise) deeper tiles that fit and can be built
        (`check_plan`); conv + pool and the direct path: nothing to vary."""
        if not isinstance(first, WindowSchedule) or first.str_field("path") in (
                "conv_pool", "direct"):
            return []
        start = group_window(group)
        if start is None:
            return []
        plans = [start, *shrink_steps(start), *thread_tiles_below(start),
                 *deeper_plans(start)]
        return [plan_attr(t.plan, t.mode) for t in plans
                if t.shared_bytes <= limit and check_plan(t, target) is None]

    def registers(self, group: GroupOp, target: Target,
                  tile: GemmTile | None = None) -> RegisterEstimate:
        """`register_model.window_group_estimate`."""
        return window_group_estimate(group)

    def leaner(self, group: GroupOp, budget: int, target: Target) -> Leaner | None:
        """A lone conv or pool: the first plan with fewer outputs per thread
        (smaller `ot`, then `pt`; `window_schedule.THREAD_TILES`) whose
        estimate fits `budget`; conv + pool has one schedule."""
        tiled = group_window(group)
        if tiled is None:
            return None
        for cand in thread_tiles_below(tiled):
            est = window_estimate(group, cand)
            if est.registers <= budget:
                return _leaner(cand, est)
        return None

    def leanest(self, group: GroupOp, target: Target) -> Leaner | None:
        """A lone conv or pool: the plan with the fewest registers (the
        fewest outputs per thread, at least), when it has fewer than now."""
        tiled = group_window(group)
        if tiled is None:
            return None
        now = window_estimate(group, tiled)
        options = [(cand, window_estimate(group, cand)) for cand in thread_tiles_below(tiled)]
        best = min(options, key=lambda o: o[1].registers, default=None)
        return _leaner(*best) if best is not None and best[1].registers < now.registers \
            else None


def _has_prologue(g: GroupInfo) -> bool:
    """Whether an op of `g` computes an operand of its window op."""
    members = set(g.ops)
    return g.anchor is not None and any(
        isinstance(v, OpResult) and v.op in members for v in g.anchor.operands)


def _leaner(tiled: TiledWindow, est: RegisterEstimate) -> Leaner:
    """`tiled` as the group's window schedule."""
    return Leaner(plan_attr(tiled.plan, tiled.mode), est, f"window tile {tiled.plan.text()}")
