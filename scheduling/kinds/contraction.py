"""The contraction kind: a matmul with its elementwise epilogue, fusec's
SIMT GEMM under a block/thread tile, or a library GEMM (`gemm = "library"`,
no kernel of fusec's)."""

from __future__ import annotations

from fusec.analysis.decompose_group import decomposed
from fusec.analysis.fusion_legality import (
    Candidate,
    GroupInfo,
    Merged,
    epilogue,
    fold_view,
    indexed_read,
)
from fusec.analysis.group_body import compute_type
from fusec.analysis.group_kind import Choice, Leaner, ScheduleContext
from fusec.analysis.scheduled_cost import ScheduledKernel
from fusec.analysis.targets import Target
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import ContractionSchedule, ScheduleAttr
from fusec.dialects.shapes import numel
from fusec.scheduling.contraction_schedule import (
    FALLBACK_TILES,
    GemmTile,
    choose_tile,
    gemm_shared_bytes,
    recorded_tile,
    tile_attr,
)
from fusec.scheduling.gemm_shape import analyze_group as analyze_gemm
from fusec.scheduling.kinds.common import group_name, tile_text
from fusec.scheduling.kinds.over_budget import SplitOverBudget
from fusec.scheduling.kinds.summary import SummaryResources
from fusec.scheduling.register_estimate import RegisterEstimate
from fusec.scheduling.register_model import contraction_estimate, current_tile
from fusec.scheduling.schedule_cost import contraction_kernel

BASE_REGISTERS = 96
"""Legality's base registers of a GEMM thread: its 8x8 accumulator tile
plus fragments."""
SHARED_BYTES = 2 * (128 * 8 + 8 * 128) * 4
"""Legality's shared bytes: the double-buffered 128x8 A and 8x128 B tiles."""
LIBRARY_SCHEDULE = {"impl": "library", "bm": 0, "bn": 0, "bk": 0, "tm": 0, "tn": 0, "vec": 0,
                    "stages": 0}
"""The schedule of a library GEMM: no tile of fusec's."""


class ContractionKind(SplitOverBudget, SummaryResources):
    """`kind = "contraction"`."""

    name = "contraction"
    base_registers = BASE_REGISTERS
    shared_bytes = SHARED_BYTES

    def merge(self, c: Candidate, mine: GroupInfo, other: GroupInfo) -> Merged | str | None:
        """A layout op feeding an operand folds into its load (option
        fold_views) before anything else; then a concat or gather read in
        place; then the pointwise epilogue reading the result."""
        if other.kind == "view" and c.options.fold_views:
            return fold_view(c)
        if (indexed := indexed_read(c)) is not None:
            return indexed
        if other.kind == "pointwise":
            return epilogue(c)
        return None

    def kernel_path(self, info: GroupInfo) -> str:
        """fusec's SIMT GEMM (the library GEMM is chosen later and only
        when it is faster, so this bounds the time from above)."""
        return "simt_gemm"

    def choose(self, ctx: ScheduleContext, group: GroupOp) -> Choice:
        """A library GEMM as such; else the tile `register-budget` chose, or
        the size-based one, made smaller until its shared bytes fit."""
        if "gemm" in group.attributes:
            return (ContractionSchedule.make(**LIBRARY_SCHEDULE),
                    "library GEMM (cuBLAS through CuPy), no kernel of fusec's", 0)
        with decomposed(group) as flat:
            g = analyze_gemm(flat)
            item = 8 if compute_type(g.matmul.result) == "float64" else 4
            start = recorded_tile(group) or choose_tile(numel(g.batch), g.m, g.n, ctx.target)
        candidates = [start, *(t for t in FALLBACK_TILES
                               if gemm_shared_bytes(t, item) < gemm_shared_bytes(start, item))]
        fitting = [t for t in candidates if gemm_shared_bytes(t, item) <= ctx.limit]
        if fitting:
            tile = fitting[0]
        else:
            tile = min(candidates, key=lambda t: gemm_shared_bytes(t, item))
            ctx.remarks.add("missed", f"group {group_name(group)}: no GEMM tile fits "
                            f"{ctx.limit} bytes of shared memory; using the smallest, "
                            f"{tile_text(tile)}")
        if tile != start:
            ctx.remarks.add("remark", f"group {group_name(group)}: tile {tile_text(start)} "
                            f"needs {gemm_shared_bytes(start, item)} bytes of shared memory, "
                            f"over the limit of {ctx.limit}; using {tile_text(tile)} "
                            f"({gemm_shared_bytes(tile, item)} bytes)")
        return (tile_attr(tile), f"gemm: block tile {tile_text(tile)}, A and B tiles in shared "
                "memory (double-buffered), epilogue in registers", gemm_shared_bytes(tile, item))

    def priced_by_schedule(self, info: GroupInfo) -> bool:
        """Yes: the GEMM tile's blocks and threads."""
        return True

    def scheduled_kernel(self, ctx: ScheduleContext, group: GroupOp,
                         attr: ScheduleAttr | None) -> ScheduledKernel:
        """The GEMM tile's blocks x threads (`schedule_cost`)."""
        return contraction_kernel(group, attr)

    def candidates(self, group: GroupOp, first: ScheduleAttr, target: Target,
                   limit: int) -> list[ScheduleAttr]:
        """SIMT only: the size-based tile and the fallback tiles whose
        shared memory fits (a library GEMM: nothing to vary)."""
        if not isinstance(first, ContractionSchedule) or first.str_field("impl") != "simt":
            return []
        with decomposed(group) as flat:
            g = analyze_gemm(flat)
            item = 8 if compute_type(g.matmul.result) == "float64" else 4
            tiles = [choose_tile(numel(g.batch), g.m, g.n, target), *FALLBACK_TILES]
        return [tile_attr(t) for t in tiles if gemm_shared_bytes(t, item) <= limit
                and t.threads <= target.max_threads_per_block]

    def registers(self, group: GroupOp, target: Target,
                  tile: GemmTile | None = None) -> RegisterEstimate:
        """`register_model.contraction_estimate` (`tile` instead of its own)."""
        return contraction_estimate(group, target, tile)

    def leaner(self, group: GroupOp, budget: int, target: Target) -> Leaner | None:
        """The first fallback tile, no bigger than the current one, whose
        estimate fits `budget` (a bigger tile would idle threads on the
        edges); `tile-and-promote` starts from it."""
        now = current_tile(group, target)
        for tile in (t for t in FALLBACK_TILES if t.bm * t.bn <= now.bm * now.bn and t != now):
            est = self.registers(group, target, tile)
            if est.registers <= budget:
                return Leaner(tile_attr(tile), est, f"tile {tile.bm}x{tile.bn}x{tile.bk}, "
                              f"{tile.tm}x{tile.tn} per thread")
        return None
