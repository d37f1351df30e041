"""Choosing every group's schedule for a target: the one place a decision
is made (`tile-and-promote` runs it; code generation runs it for a group
that reaches it without one). Each kind's choice is recorded as the group's
`schedule` attribute (`dialects/schedule.py`), with a readable line
(`schedule_text`) and the shared memory it uses (`shared_bytes_est`).

- pointwise: `scheduling/pointwise.py` (a tile for transposed operands,
  its padded shared tiles counted);
- reduction: `scheduling/reduction.py`, its shared-memory cache within the
  budget (`SHARED_BUDGET_BYTES`, or the limit when smaller);
- contraction: the tile `register-budget` chose, or the size-based one, made
  smaller until its shared bytes fit the limit; a library GEMM is recorded
  as `impl = "library"`;
- attention: the tile `fuse-attention` chose (`scheduling/attention.py`), or
  the one chosen for the default target;
- layout: the pointwise schedule of the collapsed copy read as a view
  (`codegen/layout.py`), a tile when it transposes the innermost axis;
- window: a lone conv or pool the tiled plan (`codegen/window_schedule.py`)
  shrunk until it fits the limit; conv + pool its pooled tile.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import IntegerAttr, IntegerType, StringAttr
from xdsl.ir import Operation, SSAValue

from fusec.analysis.diagnostics import op_error
from fusec.analysis.remarks import RemarkCollector
from fusec.analysis.targets import Target
from fusec.codegen import layout
from fusec.codegen.attention import group_shape as attention_group_shape
from fusec.codegen.attention_schedule import recorded_tile as recorded_attention_tile
from fusec.codegen.attention_schedule import shared_bytes as attention_shared
from fusec.codegen.contraction import analyze as analyze_gemm
from fusec.codegen.conv_pool import POOL_TILE, shared_tile
from fusec.codegen.decompose_group import decomposed
from fusec.codegen.group_body import GroupBody, compute_type
from fusec.codegen.pointwise_transpose import plan_group as plan_transposed
from fusec.codegen.pointwise_transpose import tile_shared_bytes
from fusec.codegen.reduction_plan import analyze as analyze_rows
from fusec.codegen.window_plan import STATIC_SHARED_LIMIT, WindowPlan, plan_attr
from fusec.codegen.window_schedule import fit_shared, group_window, smallest
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.schedule import SCHEDULE_KEY, ContractionSchedule, ScheduleAttr
from fusec.dialects.shapes import broadcast_shapes, numel
from fusec.scheduling import reduction
from fusec.scheduling.attention import choose_tile as choose_attention_tile
from fusec.scheduling.contraction import (
    FALLBACK_TILES,
    GemmTile,
    choose_tile,
    gemm_shared_bytes,
    recorded_tile,
    tile_attr,
)
from fusec.scheduling.pointwise import pointwise_schedule, transpose_tile


def _int(v: int) -> IntegerAttr[IntegerType]:
    return IntegerAttr(v, IntegerType(64))


def _name(group: GroupOp) -> str:
    attr = group.attributes.get("name")
    return attr.data if isinstance(attr, StringAttr) else "?"


def _ops(group: GroupOp) -> list[Operation]:
    return [op for op in group.block.ops if not isinstance(op, YieldOp)]


def _results(group: GroupOp) -> list[SSAValue]:
    last = group.block.last_op
    return list(last.operands) if isinstance(last, YieldOp) else []


def _tile(t: GemmTile) -> str:
    return f"{t.bm}x{t.bn}x{t.bk} ({t.tm}x{t.tn} per thread)"


@dataclass
class Scheduler:
    """Chooses and records the schedule of each group on `target`, within
    `limit` bytes of shared memory per block; remarks say what was shrunk."""

    target: Target
    limit: int
    remarks: RemarkCollector

    def schedule(self, group: GroupOp) -> None:
        """Record `schedule`, `schedule_text` and `shared_bytes_est` on `group`."""
        attr, line, used = self.choose(group)
        if attr is not None:
            group.attributes[SCHEDULE_KEY] = attr
        group.attributes["schedule_text"] = StringAttr(line)
        group.attributes["shared_bytes_est"] = _int(used)

    def choose(self, group: GroupOp) -> tuple[ScheduleAttr | None, str, int]:
        """The schedule of `group` (None for a kind without one), a readable line,
        and its shared bytes; nothing is recorded."""
        kind = getattr(group.attributes.get("kind"), "data", "")
        attr: ScheduleAttr | None = None
        if kind == "contraction" and "gemm" in group.attributes:
            line, used = "library GEMM (cuBLAS through CuPy), no kernel of fusec's", 0
            attr = ContractionSchedule.make(impl="library", bm=0, bn=0, bk=0, tm=0, tn=0, vec=0,
                                            stages=0)
        elif kind == "contraction":
            attr, line, used = self.contraction(group)
        elif kind == "window":
            attr, line, used = self.window(group)
        elif kind == "reduction":
            attr, line, used = self.reduction(group)
        elif kind == "attention":
            attr, line, used = self.attention(group)
        elif kind == "pointwise":
            attr, line, used = self.pointwise(group)
        elif kind == "layout":
            attr, line, used = self.pointwise(layout.collapsed(group))
            line = "layout: index remapping copy, " + line.removeprefix("pointwise: ")
        else:
            line, used = f"{kind}: index remapping copy", 0
        return attr, line, used

    def pointwise(self, group: GroupOp) -> tuple[ScheduleAttr, str, int]:
        """Flat, or the transposed-operand tile when a transpose in the group
        moves the innermost axis (`scheduling/pointwise.transpose_tile`)."""
        shape = broadcast_shapes(*(tensor_shape(v) for v in _results(group)))
        attr = pointwise_schedule(self.target, transpose_tile(_ops(group), shape), group)
        if not attr.int_field("tile"):
            return attr, (f"pointwise: {attr.int_field('elements_per_thread')} elements per "
                          f"thread, {attr.int_field('block')} threads per block"), 0
        tile = attr.int_field("tile")
        used = tile_shared_bytes(plan_transposed(group, attr))
        return attr, (f"pointwise: {tile}x{tile} output tiles, transposed operands staged "
                      f"through shared memory, {attr.int_field('block')} threads per block"), used

    def contraction(self, group: GroupOp) -> tuple[ScheduleAttr, str, int]:
        with decomposed(group) as flat:
            g = analyze_gemm(GroupBody.of(flat))
            item = 8 if compute_type(g.matmul.result) == "float64" else 4
            start = recorded_tile(group) or choose_tile(numel(g.batch), g.m, g.n, self.target)
        candidates = [start, *(t for t in FALLBACK_TILES
                               if gemm_shared_bytes(t, item) < gemm_shared_bytes(start, item))]
        fitting = [t for t in candidates if gemm_shared_bytes(t, item) <= self.limit]
        if fitting:
            tile = fitting[0]
        else:
            tile = min(candidates, key=lambda t: gemm_shared_bytes(t, item))
            self.remarks.add("missed", f"group {_name(group)}: no GEMM tile fits "
                             f"{self.limit} bytes of shared memory; using the smallest, "
                             f"{_tile(tile)}")
        if tile != start:
            self.remarks.add("remark", f"group {_name(group)}: tile {_tile(start)} needs "
                             f"{gemm_shared_bytes(start, item)} bytes of shared memory, over the "
                             f"limit of {self.limit}; using {_tile(tile)} "
                             f"({gemm_shared_bytes(tile, item)} bytes)")
        return (tile_attr(tile), f"gemm: block tile {_tile(tile)}, A and B tiles in shared "
                "memory (double-buffered), epilogue in registers", gemm_shared_bytes(tile, item))

    def attention(self, group: GroupOp) -> tuple[ScheduleAttr, str, int]:
        """The tile fuse-attention chose (its `#fusion.attention` schedule);
        over the limit, a remark (the kernel's static shared memory cannot
        shrink below its tile)."""
        tile = recorded_attention_tile(group)
        shape = attention_group_shape(group)
        if tile is None:  # a group written by hand: the fastest legal tile
            chosen = choose_attention_tile(shape, self.target)
            if isinstance(chosen, str):
                raise op_error(group, f"cannot generate this attention group: {chosen}")
            tile = chosen
        used = attention_shared(tile, shape.d, shape.dv)
        if used > self.limit:
            self.remarks.add("missed", f"group {_name(group)}: attention tile "
                             f"{tile.text()} needs {used} bytes of shared memory, over the "
                             f"limit of {self.limit}")
        return (tile.attr(), f"attention: {tile.text()}, Q/K/V/P tiles in shared memory, "
                "online softmax", used)

    def window(self, group: GroupOp) -> tuple[ScheduleAttr, str, int]:
        ops = _ops(group)
        pool = next((o for o in ops if isinstance(o, (nn.MaxPool2dOp, nn.AvgPool2dOp))), None)
        if pool is not None and any(isinstance(o, nn.Conv2dOp) for o in ops):
            ch, cw = shared_tile(pool)
            attr = plan_attr(WindowPlan(POOL_TILE, POOL_TILE, 1, 1, 1, 1), "conv_pool")
            return (attr, f"conv + pool: a {ch}x{cw} conv tile (with halo) in shared memory "
                    f"per {POOL_TILE}x{POOL_TILE} pooled outputs, each conv output a direct "
                    "loop over input channels and taps", ch * cw * 4)
        start = group_window(group)
        assert start is not None
        tiled = fit_shared(start, self.limit)
        if tiled is None:
            tiled = smallest(start)
            self.remarks.add("missed", f"group {_name(group)}: no window tile fits "
                             f"{self.limit} bytes of shared memory; using the smallest, "
                             f"{tiled.plan.text()} ({tiled.shared_bytes} bytes)")
        elif tiled != start:
            self.remarks.add("remark", f"group {_name(group)}: window tile "
                             f"{start.plan.text()} needs {start.shared_bytes} bytes of shared "
                             f"memory, over the limit of {min(self.limit, STATIC_SHARED_LIMIT)}; "
                             f"using {tiled.plan.text()} ({tiled.shared_bytes} bytes)")
        return plan_attr(tiled.plan, tiled.mode), tiled.describe(), tiled.shared_bytes

    def reduction(self, group: GroupOp) -> tuple[ScheduleAttr, str, int]:
        budget = min(reduction.SHARED_BUDGET_BYTES, self.limit)
        with decomposed(group) as flat:
            ra = analyze_rows(GroupBody.of(flat))
            sched = reduction.plan_schedule(
                ra, reduction.for_target(self.target, shared_limit=budget))
            attr = reduction.to_attr(ra, sched)
        split = (f", each row split over {sched.splits} blocks (the last to arrive combines "
                 "their partials)") if sched.splits > 1 else ""
        if sched.online:
            split += ", softmax max and sum of exps in one pass (online)"
        used = sched.scratch_bytes + sched.cache_bytes
        if sched.column:
            return attr, (f"reduction: column schedule, {sched.rows_per_block} columns x "
                          f"{sched.lanes} lanes per block, partials transposed in shared "
                          "memory" + split), used
        if sched.registers:
            return attr, (f"reduction: row in registers, {sched.per_lane} elements per lane, "
                          f"{sched.lanes} lanes per row"), sched.scratch_bytes
        on_chip = attr.str_field("row") == "shared"
        if not on_chip:
            self.remarks.add("remark", f"group {_name(group)}: rows of {ra.row_length} "
                             f"elements do not fit {budget} bytes of shared memory; staged "
                             "(later passes re-read the row from memory)")
        where = "kept on chip" if on_chip else "staged through memory"
        return attr, (f"reduction: {sched.lanes} lanes per row, {sched.rows_per_block} rows per "
                      f"block, row {where}" + split), used


def ensure_schedules(groups: list[GroupOp], target: Target) -> None:
    """Schedule the groups that have none (code generation of a module that
    did not run `tile-and-promote`), within the target's shared memory."""
    scheduler = Scheduler(target, target.shared_memory_per_block, RemarkCollector())
    for group in groups:
        if SCHEDULE_KEY not in group.attributes:
            attr = scheduler.choose(group)[0]
            if attr is not None:
                group.attributes[SCHEDULE_KEY] = attr


def proposed_schedule(group: GroupOp, target: Target) -> ScheduleAttr | None:
    """The schedule `group` would get on `target` (nothing recorded, no
    remarks): what the register and cost models read before
    `tile-and-promote` ran."""
    scheduler = Scheduler(target, target.shared_memory_per_block, RemarkCollector())
    return scheduler.choose(group)[0]
