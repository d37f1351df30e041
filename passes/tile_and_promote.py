"""The `tile-and-promote` pass: record each group's schedule (tiles and what
lives in shared memory) as attributes the emitters read.

- contraction: block tile `bm x bn x bk` and thread micro-tile `tm x tn`
  (`gemm_tile = [bm, bn, bk, tm, tn, vec]`); A and B tiles in shared memory,
  double-buffered, the epilogue in registers. The tile `register-budget`
  chose (or the emitter's size-based default) shrinks until its shared
  bytes fit the limit.
- window (one conv or pool, `codegen/window_plan.py`): the block tile
  `window_tile = [th, tw, oc_t, ci_step]` (a `th x tw` output tile, or `tw`
  consecutive pixels of a 1x1 conv, for `oc_t` output channels, staging
  `ci_step` input channels with their halo and weights in shared memory per
  step) and the thread tile `window_thread = [pt, ot]` (`pt` pixels x `ot`
  channels in registers). The plan `register-budget` recorded, or the
  default of `codegen/window_schedule.py`, shrinks (fewer channels per
  step, then a smaller spatial tile, then fewer channels per block) until
  its shared bytes fit the limit and numba's 48 KiB of static shared
  memory. A depthwise conv or pool (one channel per block, weights in
  registers) is also marked `depthwise`. A conv + pool group keeps its
  `window_tile = [8, 8]` of pooled outputs (`codegen/conv_pool.py`).
- reduction: the row held in registers when the reduction emitter chooses
  its register-resident schedule (`row_schedule = "registers"`), else kept on
  chip (`"on-chip"`) when the
  reduction emitter's cache fits the shared-memory budget it uses
  (`codegen/reduction.py`'s `SHARED_BUDGET_BYTES`, or the limit when smaller),
  else `"staged"` (re-read from memory in later passes); a column reduction
  is `"column"`.

Every group gets `schedule` (one readable line) and `shared_bytes_est`; a
tile forced smaller by `shared_memory_limit`, and a group that still does not
fit, get a remark.

The limit is the target's `shared_memory_per_block`, or `shared_memory_limit`
when smaller.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, IntegerType, ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from fusec.codegen.attention import group_tile as attention_tile
from fusec.codegen.attention_schedule import shared_bytes as attention_shared
from fusec.codegen.contraction import (
    GemmTile,
    choose_tile,
    gemm_shared_bytes,
    recorded_tile,
    tile_attr,
)
from fusec.codegen.contraction import (
    analyze as analyze_gemm,
)
from fusec.codegen.conv_pool import POOL_TILE, shared_tile
from fusec.codegen.decompose_group import decomposed
from fusec.codegen.group_body import GroupBody, compute_type
from fusec.codegen.reduction import SHARED_BUDGET_BYTES, ReductionOptions, plan_schedule
from fusec.codegen.reduction_plan import analyze as analyze_rows
from fusec.codegen.register_model import estimate_registers
from fusec.codegen.window_plan import STATIC_SHARED_LIMIT, record_plan
from fusec.codegen.window_schedule import fit_shared, group_window, smallest
from fusec.compiler import gemm_choice
from fusec.compiler.gemm_choice import GEMM_MODES, GemmChooser
from fusec.compiler.remarks import RemarkCollector
from fusec.compiler.targets import TARGETS, resolve_target
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.shapes import numel
from fusec.passes.register_budget import EST_ATTR, FALLBACK_TILES, group_name, record


def _int(v: int) -> IntegerAttr[IntegerType]:
    return IntegerAttr(v, IntegerType(64))


@dataclass
class _Scheduler:
    limit: int
    remarks: RemarkCollector

    def schedule(self, group: GroupOp) -> None:
        kind = getattr(group.attributes.get("kind"), "data", "")
        if kind == "contraction" and "gemm" in group.attributes:
            line, used = "library GEMM (cuBLAS through CuPy), no kernel of fusec's", 0
        elif kind == "contraction":
            line, used = self.contraction(group)
        elif kind == "window":
            line, used = self.window(group)
        elif kind == "reduction":
            line, used = self.reduction(group)
        elif kind == "attention":
            line, used = self.attention(group)
        elif kind == "pointwise":
            line, used = "pointwise: 4 consecutive elements per thread (16-byte accesses)", 0
        else:
            line, used = f"{kind}: index remapping copy", 0
        group.attributes["schedule"] = StringAttr(line)
        group.attributes["shared_bytes_est"] = _int(used)

    def contraction(self, group: GroupOp) -> tuple[str, int]:
        with decomposed(group) as flat:
            g = analyze_gemm(GroupBody.of(flat))
            item = 8 if compute_type(g.matmul.result) == "float64" else 4
            start = recorded_tile(group) or choose_tile(numel(g.batch), g.m, g.n)
        tile = start
        candidates = [start, *(t for t in FALLBACK_TILES
                               if gemm_shared_bytes(t, item) < gemm_shared_bytes(start, item))]
        fitting = [t for t in candidates if gemm_shared_bytes(t, item) <= self.limit]
        if fitting:
            tile = fitting[0]
        else:
            tile = min(candidates, key=lambda t: gemm_shared_bytes(t, item))
            self.remarks.add("missed", f"group {group_name(group)}: no GEMM tile fits "
                             f"{self.limit} bytes of shared memory; using the smallest, "
                             f"{_tile(tile)}")
        if tile != start:
            self.remarks.add("remark", f"group {group_name(group)}: tile {_tile(start)} needs "
                             f"{gemm_shared_bytes(start, item)} bytes of shared memory, over the "
                             f"limit of {self.limit}; using {_tile(tile)} "
                             f"({gemm_shared_bytes(tile, item)} bytes)")
        group.attributes["gemm_tile"] = tile_attr(tile)
        record(group, estimate_registers(group))  # a smaller tile holds fewer accumulators
        used = gemm_shared_bytes(tile, item)
        return (f"gemm: block tile {_tile(tile)}, A and B tiles in shared memory "
                "(double-buffered), epilogue in registers", used)

    def attention(self, group: GroupOp) -> tuple[str, int]:
        """The tile fuse-attention chose; over the limit, a remark (the
        static shared memory of the kernel cannot shrink below its tile)."""
        tile, shape, _ = attention_tile(group)
        used = attention_shared(tile, shape.d, shape.dv)
        if used > self.limit:
            self.remarks.add("missed", f"group {group_name(group)}: attention tile "
                             f"{tile.text()} needs {used} bytes of shared memory, over the "
                             f"limit of {self.limit}")
        return f"attention: {tile.text()}, Q/K/V/P tiles in shared memory, online softmax", used

    def window(self, group: GroupOp) -> tuple[str, int]:
        pool = next((o for o in _ops(group) if isinstance(o, (nn.MaxPool2dOp, nn.AvgPool2dOp))),
                    None)
        if pool is not None and any(isinstance(o, nn.Conv2dOp) for o in _ops(group)):
            ch, cw = shared_tile(pool)
            group.attributes["window_tile"] = tile_attr_2d(POOL_TILE, POOL_TILE)
            return (f"conv + pool: a {ch}x{cw} conv tile (with halo) in shared memory per "
                    f"{POOL_TILE}x{POOL_TILE} pooled outputs", ch * cw * 4)
        start = group_window(group)
        assert start is not None
        tiled = fit_shared(start, self.limit)
        if tiled is None:
            tiled = smallest(start)
            self.remarks.add("missed", f"group {group_name(group)}: no window tile fits "
                             f"{self.limit} bytes of shared memory; using the smallest, "
                             f"{tiled.plan.text()} ({tiled.shared_bytes} bytes)")
        elif tiled != start:
            self.remarks.add("remark", f"group {group_name(group)}: window tile "
                             f"{start.plan.text()} needs {start.shared_bytes} bytes of shared "
                             f"memory, over the limit of {min(self.limit, STATIC_SHARED_LIMIT)}; "
                             f"using {tiled.plan.text()} ({tiled.shared_bytes} bytes)")
        record_plan(group, tiled.plan)
        if tiled.mode == "depthwise":
            group.attributes["depthwise"] = StringAttr("true")
        record(group, estimate_registers(group))  # the thread tile sets the registers
        return tiled.describe(), tiled.shared_bytes

    def reduction(self, group: GroupOp) -> tuple[str, int]:
        budget = min(SHARED_BUDGET_BYTES, self.limit)
        with decomposed(group) as flat:
            ra = analyze_rows(GroupBody.of(flat))
            sched = plan_schedule(ra, ReductionOptions(shared_budget=budget))
            full = plan_schedule(ra, ReductionOptions(shared_budget=1 << 62))
        split = (f", each row split over {sched.splits} blocks (the last to arrive combines "
                 "their partials)") if sched.splits > 1 else ""
        if sched.column:
            group.attributes["row_schedule"] = StringAttr("column")
            return (f"reduction: column schedule, {sched.rows_per_block} columns x "
                    f"{sched.lanes} lanes per block, partials transposed in shared memory"
                    + split, sched.scratch_bytes + sched.cache_bytes)
        if sched.registers:
            group.attributes["row_schedule"] = StringAttr("registers")
            return (f"reduction: row in registers, {sched.per_lane} elements per lane, "
                    f"{sched.lanes} lanes per row", sched.scratch_bytes)
        on_chip = len(sched.cached) == len(full.cached)
        group.attributes["row_schedule"] = StringAttr("on-chip" if on_chip else "staged")
        if not on_chip:
            self.remarks.add("remark", f"group {group_name(group)}: rows of {ra.row_length} "
                             f"elements do not fit {budget} bytes of shared memory; staged "
                             "(later passes re-read the row from memory)")
        where = "kept on chip" if on_chip else "staged through memory"
        return (f"reduction: {sched.lanes} lanes per row, {sched.rows_per_block} rows per "
                f"block, row {where}" + split, sched.scratch_bytes + sched.cache_bytes)


def tile_attr_2d(th: int, tw: int) -> ArrayAttr[IntegerAttr[IntegerType]]:
    """`[th, tw]` as an attribute."""
    return ArrayAttr([_int(th), _int(tw)])


def _tile(t: GemmTile) -> str:
    return f"{t.bm}x{t.bn}x{t.bk} ({t.tm}x{t.tn} per thread)"


def _groups(func: FuncOp) -> list[GroupOp]:
    return [g for g in func.body.block.ops if isinstance(g, GroupOp)]


def _ops(group: GroupOp) -> list[Operation]:
    return [op for op in group.block.ops if not isinstance(op, YieldOp)]


@dataclass(frozen=True)
class TileAndPromotePass(ModulePass):
    """Record each group's tiles and shared-memory use (`schedule`, `gemm_tile`, ...).

    ```mlir
    // after `fusec -p 'group-each-op,tile-and-promote{shared_memory_limit=8192}'`
    %y = fusion.group (%x, %w) {name = "g0", kind = "contraction",
        gemm_tile = [32, 32, 8, 4, 4, 1], shared_bytes_est = 4352,
        schedule = "gemm: block tile 32x32x8 (4x4 per thread), ..."} ...
    ```

    Options: `target`, `shared_memory_limit` (bytes per block; 0: the
    target's), `gemm` (`auto`: the cost model picks library or fused per
    matmul, `library` where the operands allow it, `fused`), `remarks`.
    """

    name = "tile-and-promote"

    target: str = "h200"
    shared_memory_limit: int = 0
    gemm: str = "auto"
    remarks: bool = True

    def __post_init__(self) -> None:
        if self.gemm not in GEMM_MODES:
            raise ValueError(f"gemm must be one of {', '.join(GEMM_MODES)}")
        if self.shared_memory_limit < 0:
            raise ValueError("shared_memory_limit must be >= 0 (0: the target's)")
        if self.target.strip().lower() not in (*TARGETS, "auto"):
            raise ValueError(f"unknown target '{self.target}'")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        target, _ = resolve_target(self.target)
        limit = target.shared_memory_per_block
        if self.shared_memory_limit:
            limit = min(limit, self.shared_memory_limit)
        collector = RemarkCollector()
        scheduler = _Scheduler(limit, collector)
        chooser = GemmChooser(target, self.gemm, gemm_choice.library_available(), collector)
        for func in [f for f in op.walk() if isinstance(f, FuncOp)]:
            if not func.body.blocks:
                continue
            for group in _groups(func):
                if getattr(group.attributes.get("kind"), "data", "") == "contraction":
                    chooser.decide(group)
            for group in _groups(func):  # the epilogues split from library GEMMs too
                if EST_ATTR not in group.attributes:
                    record(group, estimate_registers(group))
                scheduler.schedule(group)
        if self.remarks:
            collector.store(op)
