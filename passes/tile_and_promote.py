"""The `tile-and-promote` pass: choose each group's schedule for the target
and record it as one typed attribute, `schedule` (`dialects/schedule.py`),
which the emitters read verbatim and the register and cost models read too.

The choices live in `analysis/schedule_choice.py` (docs/scheduling.md):

- pointwise `#fusion.pointwise<elements_per_thread, block>`;
- reduction `#fusion.reduction<layout, row, lanes, rows_per_block, splits,
  chunk, per_lane, cached, unroll>`: the row in registers when it fits, else
  streamed with a shared-memory cache as far as the budget allows
  (`row = "shared"`), else re-read from memory (`"memory"`, with a remark);
  rows split over blocks when they cannot fill the target;
- contraction `#fusion.contraction<impl, bm, bn, bk, tm, tn, vec, stages>`:
  the tile `register-budget` chose (or the size-based one for the target),
  shrunk until its shared bytes fit the limit; `impl = "library"` for a
  cuBLAS GEMM (`GemmChooser`);
- window `#fusion.window<path, th, tw, oc_t, ci_step, pt, ot>`: a lone conv
  or pool's tiled plan shrunk (fewer channels per step, then a smaller
  spatial tile, then fewer channels per block) until it fits the limit and
  numba's 48 KiB of static shared memory; conv + pool its pooled tile.

Every group also gets `schedule_text` (one readable line) and
`shared_bytes_est`; a tile forced smaller by `shared_memory_limit`, and a
group that still does not fit, get a remark. The limit is the target's
`shared_memory_per_block`, or `shared_memory_limit` when smaller.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.passes import ModulePass

from fusec.analysis.cudnn_library import cudnn_available
from fusec.analysis.remarks import RemarkCollector
from fusec.analysis.schedule_choice import Scheduler
from fusec.analysis.targets import resolve_target, unknown_target
from fusec.dialects.fusion import GroupOp
from fusec.passes import register_budget
from fusec.passes.register_budget import EST_ATTR, record
from fusec.scheduling import gemm_choice
from fusec.scheduling.conv_choice import CONV_MODES, ConvChooser
from fusec.scheduling.gemm_choice import GEMM_MODES, GemmChooser
from fusec.scheduling.library_tuning import active_tuner
from fusec.scheduling.register_model import estimate_registers

SCHEDULE_SETS_REGISTERS = ("contraction", "window")


def kind_of(group: GroupOp) -> str:
    """The group's `kind`."""
    return str(getattr(group.attributes.get("kind"), "data", ""))


def _groups(func: FuncOp) -> list[GroupOp]:
    return [g for g in func.body.block.ops if isinstance(g, GroupOp)]


@dataclass(frozen=True)
class TileAndPromotePass(ModulePass):
    """Choose each group's schedule for the target and record it (`schedule`).

    ```mlir
    // after `fusec -p 'group-each-op,tile-and-promote{shared_memory_limit=8192}'`
    %y = fusion.group (%x, %w) {name = "g0", kind = "contraction",
        schedule = #fusion.contraction<impl = "simt", bm = 32, bn = 32, bk = 8,
                                       tm = 4, tn = 4, vec = 1, stages = 2>,
        schedule_text = "gemm: block tile 32x32x8 (4x4 per thread), ...",
        shared_bytes_est = 4352} ...
    ```

    Options: `target`, `shared_memory_limit` (bytes per block; 0: the
    target's), `gemm` (`auto`: the cost model picks library or fused per
    matmul, `library` where the operands allow it, `fused`),
    `library_epilogue` (`library-epilogue=false`: a library GEMM computes
    the matmul alone, its whole epilogue a pointwise kernel; default true:
    cuBLASLt adds the bias and residual and applies relu or tanh GELU in the
    same call, `analysis/library_epilogue.py`), `conv` (`auto`: the cost
    model picks a cuDNN convolution or fusec's window kernel per
    convolution, `library` where cuDNN can compute it, `fused`: never the
    library; `scheduling/conv_choice.py`), `conv_tf32` (f32 library
    convolutions may use TF32 tensor cores), `remarks`.
    """

    name = "tile-and-promote"

    target: str = "h200"
    shared_memory_limit: int = 0
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
        if self.shared_memory_limit < 0:
            raise ValueError("shared_memory_limit must be >= 0 (0: the target's)")
        if (problem := unknown_target(self.target)) is not None:
            raise ValueError(problem)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        target, _ = resolve_target(self.target)
        limit = target.shared_memory_per_block
        if self.shared_memory_limit:
            limit = min(limit, self.shared_memory_limit)
        collector = RemarkCollector()
        scheduler = Scheduler(target, limit, collector)
        tuner = active_tuner()  # `--autotune` times library against own
        chooser = GemmChooser(target, self.gemm, gemm_choice.library_available(), collector,
                              self.library_epilogue, tuner,
                              lambda m, mode: replace(self, gemm=mode, remarks=False).apply(ctx, m))
        convs = ConvChooser(target, self.conv, cudnn_available(), collector, self.conv_tf32,
                            tuner,
                            lambda m, mode: replace(self, conv=mode, remarks=False).apply(ctx, m))
        for func in [f for f in op.walk() if isinstance(f, FuncOp)]:
            if not func.body.blocks:
                continue
            for group in _groups(func):
                kind = getattr(group.attributes.get("kind"), "data", "")
                if kind == "contraction":
                    chooser.decide(group, register_budget)
                elif kind == "window":
                    convs.decide(group, register_budget)
            for group in _groups(func):  # the epilogues split from library GEMMs too
                scheduler.schedule(group)
                if EST_ATTR not in group.attributes or kind_of(group) in SCHEDULE_SETS_REGISTERS:
                    # a smaller GEMM tile holds fewer accumulators, a window's
                    # thread tile sets its registers
                    record(group, estimate_registers(group, target))
        if self.remarks:
            collector.store(op)
