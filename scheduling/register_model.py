"""Registers per thread of a group's kernel, estimated from the schedule its
emitter will use (before any code is generated).

The estimate adds what one thread keeps live at once:

- *addressing*: numba passes every array as a struct; a kernel keeps the data
  pointer and the index arithmetic of each parameter (`PARAM_REGISTERS`);
- *values in flight*: a pointwise thread loads its 4-element quads before
  storing, so each result holds `vector width` registers until the store; a
  small loop body is unrolled by LLVM, which doubles what is in flight
  (`UNROLL_BONUS`);
- *accumulators*: a GEMM thread's `tm x tn` micro-tile, its A/B fragments
  (all `bk` steps of them when ptxas can hoist the loads, i.e. for the
  unvectorized small tile) and the double-buffer prefetch registers; a
  reduction's per-lane partials (one per reduction) and the unrolled elements
  a lane walks per pass; a tiled window kernel's `pt x ot` outputs, the
  fragments one step of its inner loop reads, a depthwise conv's weights and
  the halo elements a thread stages, and the next channel step's elements
  when the steps are pipelined (`window_estimate`); a conv + pool kernel's
  channel loop and bounds checks.

The constants were fitted against `ptxas -arch=sm_90 -v` on every kernel of
the examples and of the code generation tests (tests/test_register_budget.py
asserts the estimate within +-25% of ptxas for all of them).

```python
from fusec.scheduling.register_model import estimate_registers
estimate_registers(group).registers   # 31 for `nn.mul %x, %c` on tensor<1024xf32>
```
"""

from __future__ import annotations

import math

from xdsl.ir import Operation, SSAValue

from fusec.analysis.decompose_group import decomposed
from fusec.analysis.device_dtypes import value_dtype
from fusec.analysis.diagnostics import FusecError
from fusec.analysis.gemm_operand_mode import operand_mode
from fusec.analysis.group_kind import group_kind
from fusec.analysis.group_memo import planned, recorded
from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.analysis.pointwise_registers import PARAM_REGISTERS as PARAM_REGISTERS
from fusec.analysis.pointwise_registers import pointwise_register_parts
from fusec.analysis.targets import Target
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.schedule import (
    SCHEDULE_KEY,
    ContractionSchedule,
    PointwiseSchedule,
    ReductionSchedule,
    ScheduleAttr,
)
from fusec.dialects.shapes import numel
from fusec.scheduling import transposed_plan
from fusec.scheduling.contraction_schedule import GemmTile, tile_of
from fusec.scheduling.gemm_shape import analyze_group as analyze_gemm
from fusec.scheduling.layout_collapse import collapsed
from fusec.scheduling.pointwise_plan import plan_group, vector_width, wide_arrays
from fusec.scheduling.register_estimate import RegisterEstimate
from fusec.scheduling.row_vector import HALF_VECTOR
from fusec.scheduling.transposed_plan import has_views
from fusec.scheduling.window_plan import TiledWindow, geometry, recorded_plan, window_op
from fusec.scheduling.window_stage_lanes import out_lanes, staged_registers

# Fitted to ptxas (sm_90) on the generated kernels; see the module docstring.
# A layout copy (the pointwise view machinery, codegen/layout.py), refit
# 2026-12-01 on the 37 layout kernels of the fuzzer's seeds 100-199 (ptxas
# 10-42; 33 of 37 within 25%): the tiled transpose 20; a flat copy a base
# plus each element a thread moves (4 per thread: 20-32, 8: 31-42); a
# gather from a one-entry axis, whose index the compiler drops (the clamp
# to [0, 0] leaves it dead), 10.
LAYOUT_TILE_REGISTERS = 20
LAYOUT_BASE = 12
LAYOUT_PER_ELEMENT = 3
LAYOUT_NO_INDEX = 10
# An elementwise op recomputed in the copy (a bias add read only through
# head-split views): its operands per element a thread moves (GPT-2's three
# copies, ptxas: 24/24/20 -> 32/32/30 with the add, 4 elements per thread).
LAYOUT_RECOMPUTED_PER_ELEMENT = 2
GEMM_ADDRESSING = 16  # tile origins, loader offsets, loop counters
GEMM_HOIST_MAX_THREADS = 64  # blocks up to this size get every K step's fragments hoisted
REDUCTION_BASE = 9  # lane, row, the tree's indices (32-bit: refit 2026-12-01)
REDUCTION_ONE_LANE = 4  # fewer with one lane per row and few rows per block: no tree
REDUCTION_ONE_LANE_ROWS = 8
REDUCTION_PER_PRE_OP = 2  # an op before the first reduction, evaluated per element ...
REDUCTION_PRE_CAP = 4  # ... up to this many (refit 2026-12-01: module docstring)
REDUCTION_COLUMN_REGISTERS = 2  # the transposed tile's row and column
REDUCTION_PER_REDUCE = 2  # a partial and its tree operand
REDUCTION_ONLINE_REGISTERS = 2  # online softmax: the folded element and its rescale factor
REDUCTION_EW_CAP = 4  # later elementwise temporaries beyond this reuse registers
REDUCTION_PER_ELEMENT = 1.5  # each unrolled element a lane walks per pass
REDUCTION_PER_HELD_ELEMENT = 0.75  # a row element held in registers across passes
# ... and more when they come in quads (vector = 4): a quad's four values sit
# in aligned register quads for its 16-byte load and store. ptxas, sm_90
# (2026-12-02), 32 f32 per lane: softmax 48 -> 63, a layer norm written out
# of primitives 48 -> 64, rms norm + swiglu 48 -> 68.
REDUCTION_PER_HELD_QUAD_ELEMENT = 0.5
# ... plus the quads' base index (6 with the aligned/unaligned branch pair
# kernels held before the runtime aligned every array: GPT-2's f32 layer
# norm, ptxas 21, sm_90, 2026-12-06). Eight halves per access
# (`vector = 8`) move in packed words: no register quads of f32.
REDUCTION_QUAD_BASE = 1
WINDOW_BASE = 30  # output coordinates, plane offsets, the accumulator (conv + pool)
WINDOW_CHANNEL_LOOP = 8  # a channel loop around a multi-tap window
WINDOW_PADDING = 4  # the two bounds checks per tap
WINDOW_PER_OUTPUT = 2  # one more stored result
WINDOW_UNROLLED_TAP = 2  # an input and a weight per unrolled tap
# tiled window kernels (codegen/window_tiled.py)
WINDOW_TILED_BASE = {"pixels": 22, "general": 21, "depthwise": 15}  # indices, tile origins
WINDOW_PIXEL_ACC = 0.625  # per accumulator of a 1x1 conv
WINDOW_PIXEL_FRAGMENT = 1.125  # per pixel or weight a channel step reads
WINDOW_GENERAL_COLUMN = 0.65  # per input row or weight a kernel column reads
WINDOW_DEPTHWISE_ROW = 0.5  # per input row a depthwise thread reads per kernel column
WINDOW_DEPTHWISE_WEIGHT = 0.375  # per weight a depthwise thread holds
WINDOW_DEPTHWISE_STAGED = 1.0  # per element of the halo tile a thread stages
WINDOW_DEPTHWISE_LANES = 1.25  # per doubling of the lanes that own outputs
WINDOW_DEPTHWISE_ACROSS = 12  # a tile narrower than the image
# A pool thread's each further output row: its running max or sum and its rows'
# taps in flight (fitted 2026-12-01 on lone 2x2 to 5x5 pools of 56x56 images,
# ptxas 31-56; a thread with one output row is unchanged)
WINDOW_POOL_PER_OUTPUT_ROW = 4
WINDOW_PREFETCHED = {"pixels": 1.375, "general": 1.75}  # per element held by a pipelined step


def _make(*parts: tuple[str, float]) -> RegisterEstimate:
    clean = tuple((k, round(v)) for k, v in parts)
    return RegisterEstimate(sum(v for _, v in clean), clean)


def _ops(group: GroupOp) -> list[Operation]:
    return [op for op in group.block.ops if not isinstance(op, (YieldOp, nn.ConstantOp))]


def _outputs(group: GroupOp) -> list[SSAValue]:
    last = group.block.last_op
    return list(last.operands) if isinstance(last, YieldOp) else []


def _params(group: GroupOp) -> int:
    return len(group.block.args) + len(_outputs(group))


def group_schedule_or_proposed(group: GroupOp, target: Target) -> ScheduleAttr | None:
    """The schedule recorded on `group`, else the one the scheduler would
    choose on `target` (`analysis/schedule_choice.py`): the models read the same
    decision the emitter will."""
    attr = group.attributes.get(SCHEDULE_KEY)
    if isinstance(attr, ScheduleAttr):
        return attr
    from fusec.analysis.schedule_choice import proposed_schedule

    return proposed_schedule(group, target)


def estimate_registers(group: GroupOp, target: Target,
                       tile: GemmTile | None = None) -> RegisterEstimate:
    """The registers per thread of `group`'s kernel under its schedule on
    `target`, from its kind (`GroupKind.registers`; a group without a kind
    is pointwise); `tile` overrides the GEMM tile (what `register-budget`
    tries when it re-schedules). Decided once while the group, its recorded
    schedule, the target and `tile` stay as they are (`analysis/group_memo.py`)."""
    return planned("registers", group, lambda g: decide_registers(g, target, tile),
                   extra=(target, tile, recorded(group)))


def decide_registers(group: GroupOp, target: Target,
                     tile: GemmTile | None = None) -> RegisterEstimate:
    """`estimate_registers` decided afresh, by the group's kind."""
    name = getattr(group.attributes.get("kind"), "data", "pointwise")
    return group_kind(name, group).registers(group, target, tile)


def layout_estimate(group: GroupOp, target: Target) -> RegisterEstimate:
    """A layout copy under its schedule (the pointwise schedule of its
    collapsed copy): the tiled transpose, or a flat copy of
    `elements_per_thread` elements per thread."""
    schedule = group_schedule_or_proposed(group, target)
    tile = schedule.int_field("tile") if isinstance(schedule, PointwiseSchedule) else 0
    per_thread = schedule.int_field("elements_per_thread") \
        if isinstance(schedule, PointwiseSchedule) else 1
    computed = sum(op_kind(op) in (OpKind.ELEMENTWISE, OpKind.BROADCAST) for op in _ops(group))
    recomputed = ("recomputed elementwise ops",
                  LAYOUT_RECOMPUTED_PER_ELEMENT * (4 if tile else per_thread) * computed)
    if tile:  # 32 x 8 threads per 32 x 32 tile: 4 elements each
        return _make(("tiled transpose", LAYOUT_TILE_REGISTERS), recomputed)
    gathers = [op for op in _ops(group) if isinstance(op, nn.GatherOp)]
    if gathers and all(tensor_shape(g.operands[0])[g.axis] == 1 for g in gathers):
        return _make(("gather from a one-entry axis, no index", LAYOUT_NO_INDEX), recomputed)
    # a wide access moves `lanes` elements on one index (scheduling/flat_vector.py)
    accesses = per_thread // _layout_lanes(group, schedule)
    return _make(("layout copy", LAYOUT_BASE),
                 ("accesses per thread", LAYOUT_PER_ELEMENT * accesses), recomputed)


def _layout_lanes(group: GroupOp, schedule: ScheduleAttr | None) -> int:
    """Elements per access of a flat layout copy: its collapsed group's
    plan's (1 for a group that plan refuses; its writer reports why)."""
    if not isinstance(schedule, PointwiseSchedule):
        return 1
    try:
        flat = collapsed(group)
        return transposed_plan.access_lanes(transposed_plan.planned_group(flat, schedule))
    except FusecError:
        return 1


def contraction_estimate(group: GroupOp, target: Target,
                         tile: GemmTile | None = None) -> RegisterEstimate:
    """A contraction group under its schedule on `target` (`tile` instead
    of its tile when given); a library GEMM is no kernel."""
    schedule = group_schedule_or_proposed(group, target)
    assert tile is not None or isinstance(schedule, ContractionSchedule)
    if tile is None and schedule.str_field("impl") == "library":  # type: ignore[union-attr]
        return _make(("library call, no kernel", 0))
    return _contraction(group, tile or tile_of(schedule))  # type: ignore[arg-type]


def pointwise_estimate(group: GroupOp, target: Target) -> RegisterEstimate:
    """A pointwise group under its schedule on `target` (`_pointwise`)."""
    schedule = group_schedule_or_proposed(group, target)
    assert isinstance(schedule, PointwiseSchedule)
    return _pointwise(group, schedule)


def reduction_estimate(group: GroupOp, target: Target) -> RegisterEstimate:
    """A reduction group under its schedule on `target` (`_reduction`)."""
    schedule = group_schedule_or_proposed(group, target)
    assert isinstance(schedule, ReductionSchedule)
    return _reduction(group, schedule)


def window_group_estimate(group: GroupOp) -> RegisterEstimate:
    """A window group: a lone window op's tiled kernel, or conv + pool."""
    return _window(group)


def _pointwise(group: GroupOp, schedule: PointwiseSchedule) -> RegisterEstimate:
    """Every element's loads are issued before any arithmetic, so a thread
    holds, per array it reads or writes, a base address and its
    `elements_per_thread` values (halves packed in words), plus the
    intermediates live at the widest point of the op order; indices are
    32-bit and cheap (`codegen/pointwise_index.py`). A thread never holds
    more elements than the iteration space gives it (a kernel smaller than
    one block's chunk keeps the rest of its accesses clamped and idle); a
    partial last chunk's clamps and flags cost per further access."""
    if has_views(group):
        return _make(*transposed_plan.register_parts(group, schedule))
    plan = plan_group(group)
    plan.unroll = schedule.int_field("elements_per_thread")
    plan.threads = schedule.int_field("block")
    plan.vector = vector_width(plan)
    held = plan.vector * -(-plan.numel // (plan.threads * plan.vector))
    ops = [op for op in plan.ops if not isinstance(op, nn.ConstantOp)]
    accesses = min(plan.unroll, held) // plan.vector
    tail = (plan.numel // plan.vector) % (plan.threads * (plan.unroll // plan.vector)) != 0
    return _make(*pointwise_register_parts(
        ops, list(group.block.args), plan.results, accesses, plan.vector,
        len(wide_arrays(plan)), tail))


def gemm_registers(tile: GemmTile, k: int, epilogue_ops: int = 0,
                   direct: bool = True) -> RegisterEstimate:
    """A GEMM thread: accumulators, fragments, prefetch, addressing. With one
    K tile there is no loop (no prefetch); with two, or an operand computed
    per element (not `direct`), half the steps' fragments are hoisted; a
    vectorized micro-tile, or a block of more than 64 threads, keeps two
    steps of fragments (ptxas hoists all `bk` steps only for small blocks)."""
    tiles = -(-k // tile.bk)
    acc = tile.tm * tile.tn
    prefetch = (tile.bm * tile.bk + tile.bk * tile.bn) // tile.threads
    step = tile.tm + tile.tn
    if tiles == 1:
        frags, prefetch = step, 0
    elif tile.vec > 1 or tile.threads > GEMM_HOIST_MAX_THREADS:
        frags = 2 * step
    elif tiles == 2 or not direct:
        frags = tile.bk * step // 2
    else:
        frags = tile.bk * step
    return _make(("accumulators", acc), ("fragments", frags), ("prefetch", prefetch),
                 ("addressing", GEMM_ADDRESSING), ("epilogue", min(epilogue_ops, 2)))


def current_tile(group: GroupOp, target: Target) -> GemmTile:
    """The tile of `group`'s contraction schedule (recorded or proposed)."""
    schedule = group_schedule_or_proposed(group, target)
    assert isinstance(schedule, ContractionSchedule)
    return tile_of(schedule)


def _contraction(group: GroupOp, tile: GemmTile) -> RegisterEstimate:
    with decomposed(group) as flat:
        g = analyze_gemm(flat)
        epilogue = len(_ops(flat)) - 1
        direct = all(operand_mode(v)[0] == "direct" for v in (g.a, g.b))
        return gemm_registers(tile, g.k, epilogue, direct)


def _reduction(group: GroupOp, schedule: ReductionSchedule) -> RegisterEstimate:
    """Partials per reduction, elementwise temporaries, and the row elements
    a lane walks: held across passes when the schedule keeps the row in
    registers, an unrolled loop otherwise; an online softmax pass folds
    each element into a running max and a rescaled sum."""
    ops = _ops(group)
    reds = [op for op in ops if op_kind(op) is OpKind.REDUCTION]
    ew = len(ops) - len(reds)
    pre = ops.index(reds[0]) if reds else 0  # evaluated per element of the row
    if schedule.str_field("row") == "registers":
        per_lane = max(1, schedule.int_field("per_lane"))
        quads = schedule.int_field("vector") > 1
        f32_quads = quads and schedule.int_field("vector") != HALF_VECTOR
        held = (REDUCTION_PER_HELD_ELEMENT
                + (REDUCTION_PER_HELD_QUAD_ELEMENT if f32_quads else 0)) * per_lane
        held += REDUCTION_QUAD_BASE if quads else 0
    else:
        # a streamed pass walks the row in steps of `lanes`, unrolled
        lanes = schedule.int_field("lanes")
        held = REDUCTION_PER_ELEMENT * (min(_row_steps(group, lanes), 16) - 1)
    column = schedule.str_field("layout") == "column"
    lone = (schedule.int_field("lanes") == 1
            and schedule.int_field("rows_per_block") <= REDUCTION_ONE_LANE_ROWS)
    return _make(
        ("base", REDUCTION_BASE - (REDUCTION_ONE_LANE if lone else 0)),
        ("column indexing", REDUCTION_COLUMN_REGISTERS if column else 0),
        ("online statistics", REDUCTION_ONLINE_REGISTERS * schedule.int_field("online")),
        ("partials", REDUCTION_PER_REDUCE * max(1, len(reds))),
        ("per-element ops", REDUCTION_PER_PRE_OP * min(pre, REDUCTION_PRE_CAP)),
        ("temporaries", min(ew - pre, REDUCTION_EW_CAP)),
        ("row elements", held),
    )


def _row_steps(group: GroupOp, lanes: int) -> int:
    reds = [op for op in _ops(group) if isinstance(op, nn.ReduceOp)]
    if not reds:
        return 1
    shape = reds[0].operand_shape()
    return max(1, -(-numel(tuple(shape[a] for a in reds[0].axes)) // max(1, lanes)))


def _window(group: GroupOp) -> RegisterEstimate:
    """A lone window op under its recorded tiled schedule, or the default
    plan the scheduler starts from (`register-budget` runs before it); a
    conv + pool group."""
    op = window_op(group)
    if op is not None:
        from fusec.scheduling.window_schedule import default_plan

        geo = geometry(op)
        return window_estimate(group, TiledWindow(geo, recorded_plan(group) or default_plan(geo)))
    return _conv_pool(group)


def window_estimate(group: GroupOp, tiled: TiledWindow) -> RegisterEstimate:
    """A tiled window kernel (`codegen/window_tiled.py`) under `tiled`.

    - 1x1 conv: the `pt x ot` accumulators (ptxas overlaps some with the
      fragments), the `pt + ot` values a channel step reads;
    - general conv: the accumulators and what one kernel column reads (its
      distinct input rows and `kh x ot` weights, hoisted together), or
      for a window looped tap by tap one tap's `pt` inputs and `ot` weights;
    - depthwise conv and pools: the input rows a thread reads per kernel
      column, a conv's weights, the halo elements it stages (all loads in
      flight; one when staged in a loop; its words when they hold more),
      its lane indexing;
    - pipelined channel steps hold every staged element through the FMAs.

    f64 values take two registers each. Fitted on about 150 kernels (1x1,
    3x3, 5x5 and 7x7 convs, strided, dilated and grouped, depthwise convs
    and pools, 4x4 to 224x224 images, f32 and f64): most within 20% of
    ptxas, a few small or strided ones up to 35% off."""
    p, g = tiled.plan, tiled.geo
    words = g.item // 4
    mode = tiled.mode
    if mode == "pixels":
        work = (("accumulators", WINDOW_PIXEL_ACC * p.pt * p.ot),
                ("fragments", WINDOW_PIXEL_FRAGMENT * (p.pt + p.ot)))
    elif mode == "general":
        # a looped window (`looped_taps`) reads one tap's inputs and weights
        # per iteration, an unrolled one a kernel column's rows and weights
        read = p.pt + p.ot if tiled.looped_taps else tiled.rows_touched + g.kh * p.ot
        work = (("accumulators", float(p.pt * p.ot)),
                ("fragments", WINDOW_GENERAL_COLUMN * read))
    else:
        weights = g.taps if g.kind == "conv" and tiled.unrolled_taps else 0
        # a tile staged in words holds them in flight; its unaligned blocks
        # load the same lanes one by one (no element-by-element staging)
        op = window_op(group)
        flat = staged_registers(tiled, value_dtype(op.operands[0])) if op is not None else None
        staged = tiled.staged_in_flight if flat is None else flat // words
        work = (("input rows", WINDOW_DEPTHWISE_ROW * tiled.rows_touched),
                ("weights", WINDOW_DEPTHWISE_WEIGHT * weights),
                ("staged", WINDOW_DEPTHWISE_STAGED * staged))
    prefetch = WINDOW_PREFETCHED.get(mode, 0.0) * tiled.staged_per_thread * tiled.prefetched
    extra = max(0, len(_outputs(group)) - 1) * WINDOW_PER_OUTPUT
    indexing = 0.0
    if mode == "depthwise":
        # lane indices fold away on a handful of lanes; a tile narrower than
        # the image makes its column offset, and every halo clamp, a variable
        indexing = WINDOW_DEPTHWISE_LANES * math.log2(tiled.lanes)
        indexing += WINDOW_DEPTHWISE_ACROSS * (tiled.spatial_tiles[1] > 1)
        # a pool's outputs held per output row, unless they go out through
        # the halo tile in words (`window_stage_lanes.out_lanes`): ptxas
        # counted 32 registers for 3x3 and 5x5 stride-1 max pools either way
        op = window_op(group)
        held = op is None or out_lanes(tiled, value_dtype(op.results[0])) == 1
        if g.kind != "conv" and held:
            extra += WINDOW_POOL_PER_OUTPUT_ROW * (p.pt - 1)
    return _make(
        ("base", WINDOW_TILED_BASE[mode]),
        ("indexing", indexing),
        *((name, words * v) for name, v in work),
        ("prefetched", words * prefetch),
        ("outputs", extra),
    )


def _conv_pool(group: GroupOp) -> RegisterEstimate:
    """A conv + pool group (`codegen/conv_pool.py`)."""
    ops = _ops(group)
    conv = next((op for op in ops if isinstance(op, nn.Conv2dOp)), None)
    loop = pads = 0
    if conv is not None:
        kh, kw = conv.operand_shape(1)[2:]
        per_group_in = conv.operand_shape(0)[1] // conv.groups
        loop = WINDOW_CHANNEL_LOOP if per_group_in > 1 and kh * kw > 1 else 0
        pads = WINDOW_PADDING if any(conv.pads) else 0
    extra = max(0, len(_outputs(group)) - 1) * WINDOW_PER_OUTPUT
    taps = 0
    pooled = any(isinstance(op, (nn.MaxPool2dOp, nn.AvgPool2dOp)) for op in ops)
    if conv is not None and pooled and not loop:
        # conv + pool (codegen/conv_pool.py): the tile loop has a fixed trip
        # count, so a channel-less window's taps are unrolled and hoisted
        kh, kw = conv.operand_shape(1)[2:]
        taps = WINDOW_UNROLLED_TAP * kh * kw
    return _make(("base", WINDOW_BASE), ("channel loop", loop), ("padding", pads),
                 ("unrolled taps", taps), ("outputs", extra))
