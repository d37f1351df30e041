"""Choosing the tile of a fused attention (`codegen/attention.py`) for a
target, and whether fusing pays at all.

- `legal_tiles`: every tile of the search space (`BLOCK_Q x BLOCK_K x ROWS x
  COLS x STAGES`) that the emitter accepts and that fits the target's shared
  memory per block (past the static 48 KiB the kernel takes its tiles from
  dynamic shared memory) and register budget; where the grid leaves SMs
  idle, the split-KV tiles too (`split_tiles`: query tiles down to one
  query, the threads on keys, and `choose_splits` chunks of the keys);
- `fused_time`: the modelled time of one tile (`scheduling/attention_schedule.
  step_clocks` per key step and block, times the waves the grid needs at the
  occupancy the tile's registers, shared memory and threads allow, over
  `attention_efficiency`), never below the DRAM time of Q, K, V and O;
  a split tile runs `splits` times the blocks, each over its chunk of the
  keys, and adds the partials' traffic and the combine kernel;
- `unfused_time`: the three-kernel path (QK GEMM with its score ops, the
  softmax as a row reduction, PV GEMM; the scores through memory), each
  GEMM priced as the SIMT kernel or the library GEMM, as `tile-and-promote`
  will choose it (in f16/bf16 the library's tensor cores make this path
  the faster one), and a library GEMM's operands and output laid out by
  copy kernels where it cannot take them in place (`AttentionShape.relayout`:
  on an H100, ViT-B/16's attention in bf16 spent 12 us per layer copying
  Q, K and V out of the packed projection and 11 us on the output, beside
  the 58 us of its two batched GEMMs);
- `choose_tile`: the fastest legal tile; `attention_candidates`: the legal
  tiles of a group as schedule attributes (for autotuning): the fastest of
  each kind first (`candidate_order`: static or dynamic shared memory, one
  or two stages), so that a tuner timing a few sees each kind.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from fusec.analysis.cost_model import gemm_choice
from fusec.analysis.targets import Target
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import AttentionSchedule
from fusec.scheduling.attention_decode_schedule import (
    DECODE_MAX_QUERIES,
    DECODE_WARPS,
    decode_head_problem,
)
from fusec.scheduling.attention_group import group_shape
from fusec.scheduling.attention_mma_schedule import mma_problem
from fusec.scheduling.attention_schedule import (
    ITEM,
    AttentionShape,
    AttentionTile,
    attention_registers,
    shared_bytes,
    step_clocks,
)

BLOCK_Q = (32, 64, 128)
BLOCK_K = (16, 32, 64)
ROWS = (2, 4, 8)
COLS = (2, 4, 8)
STAGES = (1, 2)  # 2: the next K/V tile prefetched into registers (the register model
# counts them, so the tiles that would spill are not legal)
MMA_BLOCK_Q = (32, 64, 128)  # tensor-core tiles: 16 queries per warp
MMA_BLOCK_K = (32, 64)  # one stage: a register prefetch spilled or was not faster (docs)
MMA_CAPABILITY = (8, 0)  # TF32 and bf16 mma.sync
MMA_REGISTER_MARGIN = 16  # below the thread's limit: ptxas spilled 128 bytes at 255
# registers where the model said 240 (`scheduling/attention_mma_schedule.py`)
MIN_THREADS = 64  # two warps: fewer leaves the SM's schedulers idle
MAX_THREADS = 512
REGISTER_GRANULE = 8  # registers are allocated per thread in units of 8
# The three-kernel path: the scores are written by the QK kernel, read and
# written by the softmax, read by the PV kernel.
SCORE_PASSES = 4
# Split-KV (`codegen/attention_split.py`): small query tiles for few queries
# (a block of one query puts its threads on keys), blocks of one warp (the
# many blocks a split grid has keep the SM's schedulers busy), and chunks of
# at least MIN_CHUNK_TILES K/V tiles (shorter ones spend more on the
# partials and the block's set-up than the split gains).
SPLIT_BLOCK_Q = (1, 2, 4, 8, 16)
SPLIT_ROWS = (1, 2, 4)
SPLIT_COLS = (1, 2, 4)
MIN_SPLIT_THREADS = 32
MIN_CHUNK_TILES = 4
MAX_SPLIT_WAVES = 4  # split counts tried besides the powers of two: 1..4 whole waves
PARTIAL_PASSES = 2  # the partials are written once and read once
# Decode tiles (`codegen/attention_decode.py`, offered with `fuse-attention{
# decode=true}`): priced as a stream of K and V at the target's bandwidth,
# scaled down where the grid's warps hold fewer bytes in flight per SM than
# DECODE_BYTES_IN_FLIGHT (latency x bandwidth per SM: ~0.6 us x 4.8 TB/s /
# 132 SMs on the H200; not yet measured for this kernel).
DECODE_UNROLL = 4  # keys a warp loads per iteration (K and V rows in flight)
DECODE_BYTES_IN_FLIGHT = 24 * 1024
DECODE_MIN_CHUNK_STEPS = 4  # iterations per chunk at least, as MIN_CHUNK_TILES


def legal_tiles(shape: AttentionShape, target: Target, limit: int | None = None,
                splits: int | None = None, decode: bool = False) -> list[AttentionTile]:
    """Every tile the emitter accepts that fits `limit` bytes of shared
    memory (default: the target's per block, dynamic shared memory included)
    and the target's register budget; block_q no larger than needed for `s`
    queries; split-KV tiles where they pay (`splits` None) or only tiles
    with `splits` chunks (1: none split); with `decode`, the decode tiles
    too (each with its `choose_decode_splits`)."""
    smem = min(limit or target.shared_memory_per_block, target.shared_memory_per_block)
    tiles = []
    simt = [AttentionTile(*t) for t in itertools.product(BLOCK_Q, BLOCK_K, ROWS, COLS, STAGES)]
    mma = [AttentionTile.mma(bq, bk) for bq, bk in itertools.product(MMA_BLOCK_Q, MMA_BLOCK_K)]
    if target.compute_capability < MMA_CAPABILITY or \
            mma_problem(shape.d, shape.dv, shape.element) is not None:
        mma = []
    if splits is not None:  # forced: these splits, simt only (1: the tiles that never split)
        simt = simt if splits == 1 else split_tiles(shape, target, splits)
        mma = mma if splits == 1 else []
    else:
        simt += split_tiles(shape, target)
    if decode:
        simt += decode_tiles(shape, target)
    for t in simt + mma:
        bq, bk = t.block_q, t.block_k
        fewest = MIN_SPLIT_THREADS if t.splits > 1 else MIN_THREADS
        if t.problem(target) is not None or not fewest <= t.threads <= MAX_THREADS:
            continue
        if bq > max(BLOCK_Q[0], shape.s) or bk > max(BLOCK_K[0], shape.skv):
            continue
        if shared_bytes(t, shape.d, shape.dv, shape.element) > smem:
            continue
        regs = attention_registers(t, shape.d, shape.dv, shape.params).registers
        # an mma tile holds its scores and outputs in registers, as
        # FlashAttention does, at the occupancy `resident_blocks` prices
        if regs > (target.max_registers_per_thread - MMA_REGISTER_MARGIN if t.engine == "mma"
                   else target.register_budget):
            continue
        tiles.append(t)
    return tiles


def decode_tiles(shape: AttentionShape, target: Target) -> list[AttentionTile]:
    """A decode tile per warp count in DECODE_WARPS, each with its
    `choose_decode_splits`; none past DECODE_MAX_QUERIES queries or for
    head dims the lanes cannot share."""
    if shape.s > DECODE_MAX_QUERIES or decode_head_problem(shape.d, shape.dv) is not None:
        return []
    tiles = [AttentionTile.decode(shape.s, w, DECODE_UNROLL) for w in DECODE_WARPS]
    return [replace(t, splits=choose_decode_splits(t, shape, target)) for t in tiles]


def forced_decode_tile(shape: AttentionShape, target: Target, warps: int, unroll: int,
                       splits: int | None) -> AttentionTile | str:
    """The decode tile of `fuse-attention{engine=decode}` (`splits` None:
    chosen), or why this attention cannot take one."""
    if shape.s > DECODE_MAX_QUERIES:
        return f"a decode tile holds at most {DECODE_MAX_QUERIES} queries (S = {shape.s})"
    if (problem := decode_head_problem(shape.d, shape.dv)) is not None:
        return problem
    tile = AttentionTile.decode(shape.s, warps, unroll or DECODE_UNROLL)
    if (problem := tile.problem(target)) is not None:
        return problem
    n = splits or choose_decode_splits(tile, shape, target)
    return normalized_splits(replace(tile, splits=n), shape)


def choose_decode_splits(tile: AttentionTile, shape: AttentionShape, target: Target) -> int:
    """Chunks of the keys for a decode tile: the fastest (`decode_time`)
    power of two, each chunk at least DECODE_MIN_CHUNK_STEPS iterations of
    the block (fewer splits on ties)."""
    most = max(1, -(-shape.skv // tile.block_k) // DECODE_MIN_CHUNK_STEPS)
    counts = [1 << k for k in range(most.bit_length())]
    timed = [(decode_time(normalized_splits(replace(tile, splits=n), shape), shape, target), n)
             for n in counts]
    return min(timed)[1]


def decode_time(tile: AttentionTile, shape: AttentionShape, target: Target) -> float:
    """Seconds of a decode tile: Q, K, V and the output at the target's
    bandwidth, over the fraction of it the grid's warps keep in flight
    (DECODE_BYTES_IN_FLIGHT per SM) and the last wave's idle SMs, plus the
    combine of a split tile."""
    plan = tile.split_plan(shape.skv)
    blocks = shape.heads * -(-shape.s // tile.block_q) * plan.splits
    wave = target.sms * resident_blocks(tile, shape, target)
    waves = -(-blocks // wave)
    per_warp = tile.cols * (shape.d + shape.dv) * shape.item  # a warp's rows in flight
    in_flight = min(blocks, wave) / target.sms * tile.lanes * per_warp
    fill = min(1.0, in_flight / DECODE_BYTES_IN_FLIGHT) * blocks / (waves * min(blocks, wave))
    io = shape.heads * (shape.s * (shape.d + shape.dv) + shape.skv * (shape.d + shape.dv))
    return io * shape.item / (target.memory_bandwidth * fill) + target.launch_overhead + \
        combine_time(tile, shape, target)


def split_tiles(shape: AttentionShape, target: Target, splits: int | None = None
                ) -> list[AttentionTile]:
    """The split-KV tiles (one stage: a chunk is few K/V tiles), each with
    `splits` chunks or its `choose_splits`; none where no tile splits."""
    # query tiles up to the power of two that holds every query
    block_q = [b for b in (*SPLIT_BLOCK_Q, *BLOCK_Q) if b == 1 or b < 2 * shape.s]
    tiles = []
    for bq, bk, rows, cols in itertools.product(block_q, BLOCK_K, sorted({*SPLIT_ROWS, *ROWS}),
                                                sorted({*SPLIT_COLS, *COLS})):
        tile = AttentionTile(bq, bk, rows, cols)
        if tile.problem(target) is not None:
            continue
        n = splits or choose_splits(tile, shape, target)
        if n > 1:
            tiles.append(normalized_splits(replace(tile, splits=n), shape))
    return list(dict.fromkeys(t for t in tiles if t.splits > 1))


def choose_splits(tile: AttentionTile, shape: AttentionShape, target: Target) -> int:
    """Chunks of the keys for `tile`, each at least MIN_CHUNK_TILES K/V
    tiles: the fastest (`fused_time`) of the powers of two and of the
    counts that fill 1 to MAX_SPLIT_WAVES whole waves (the SMs times the
    blocks of the tile each holds); 1 where the unsplit grid fills a wave
    or the keys are too few to split.
    (Whether a split tile beats the unsplit ones is `ranked_tiles`' call.)"""
    blocks = shape.heads * -(-shape.s // tile.block_q)
    wave = target.sms * resident_blocks(tile, shape, target)
    if blocks >= wave:  # the grid already fills the SMs
        return 1
    most = -(-shape.skv // tile.block_k) // MIN_CHUNK_TILES
    counts = {1 << k for k in range(1, most.bit_length())}
    counts |= {w * wave // blocks for w in range(1, MAX_SPLIT_WAVES + 1)}
    counts = {n for n in counts if 1 < n <= most}
    timed = [(fused_time(normalized_splits(replace(tile, splits=n), shape), shape, target), n)
             for n in sorted(counts)]
    return min(timed)[1] if timed else 1


def normalized_splits(tile: AttentionTile, shape: AttentionShape) -> AttentionTile:
    """`tile` with the chunks its splits make of the keys (never an empty one)."""
    return replace(tile, splits=tile.split_plan(shape.skv).splits) if tile.splits > 1 else tile


def resident_blocks(tile: AttentionTile, shape: AttentionShape, target: Target) -> int:
    """Blocks of this tile one SM holds at once."""
    regs = attention_registers(tile, shape.d, shape.dv, shape.params).registers
    regs = -(-regs // REGISTER_GRANULE) * REGISTER_GRANULE
    by_regs = target.registers_per_sm // (regs * tile.threads)
    smem = shared_bytes(tile, shape.d, shape.dv, shape.element)
    by_smem = target.shared_memory_per_sm // max(1, smem)
    by_threads = target.max_threads_per_sm // tile.threads
    return max(1, min(by_regs, by_smem, by_threads, target.max_blocks_per_sm))


def clock_hz(target: Target) -> float:
    """The SM clock the fp32 rate implies (2 flops per FMA lane per clock)."""
    return target.fp32_flops / (2 * target.sms * target.fma_lanes_per_sm)


def fused_time(tile: AttentionTile, shape: AttentionShape, target: Target) -> float:
    """Seconds of the fused kernel with `tile` (see the module docstring)."""
    if tile.engine == "decode":
        return decode_time(tile, shape, target)
    plan = tile.split_plan(shape.skv)
    blocks = shape.heads * -(-shape.s // tile.block_q) * plan.splits
    resident = resident_blocks(tile, shape, target)
    waves = -(-blocks // (target.sms * resident))
    per_block = plan.chunk_tiles * step_clocks(tile, target, shape.d, shape.dv, shape.element)
    # a wave's `resident` blocks share the SM's pipes
    busy = waves * min(resident, -(-blocks // target.sms)) * per_block
    efficiency = target.attention_mma_efficiency if tile.engine == "mma" else \
        target.attention_efficiency
    compute = busy / clock_hz(target) / efficiency
    io = shape.heads * (shape.s * (shape.d + shape.dv) + shape.skv * (shape.d + shape.dv))
    return max(compute, io * shape.item / target.memory_bandwidth) + target.launch_overhead + \
        combine_time(tile, shape, target)


def combine_time(tile: AttentionTile, shape: AttentionShape, target: Target) -> float:
    """Seconds a split tile adds: its partials (f32 row max, row sum and
    outputs per chunk and query) written and read back, and the combine's
    launch; 0 for a tile that does not split."""
    splits = tile.split_plan(shape.skv).splits
    if splits == 1:
        return 0.0
    partials = splits * shape.heads * shape.s * (shape.dv + 2) * ITEM
    return PARTIAL_PASSES * partials / target.memory_bandwidth + target.launch_overhead


def unfused_time(shape: AttentionShape, target: Target, gemm: str = "fused",
                 library: bool = False, tf32: bool = False) -> float:
    """Seconds of the three-kernel path: two GEMMs and the softmax, at
    `attention_unfused_efficiency` of their roofline. Each GEMM is priced
    as `tile-and-promote` will choose it (`gemm` mode, whether the library
    is available, `tf32`): fusec's SIMT GEMM, or a library GEMM at the
    element type's rate (tensor cores for f16/bf16)."""
    h, s, skv, d, dv, item = (shape.heads, shape.s, shape.skv, shape.d, shape.dv, shape.item)
    scores = h * s * skv * item
    sizes = {"q": h * s * d * item, "k": h * skv * d * item, "v": h * skv * dv * item,
             "out": h * s * dv * item}

    copied: list[str] = []  # what copy kernels lay out for a library GEMM

    def matmul(flops: float, operand_bytes: int, *operands: str) -> float:
        choice = gemm_choice(target, flops, operand_bytes, scores, 0, gemm, library,
                             shape.element, tf32)
        if not choice.library:
            return choice.t_fused  # fusec's GEMM reads and writes through the views
        copied.extend(w for w in operands if w in shape.relayout)
        return choice.t_library

    qk = matmul(2 * h * s * skv * d, h * (s + skv) * d * item, "q", "k")
    pv = matmul(2 * h * s * skv * dv, h * (skv + s) * dv * item, "v", "out")
    softmax = 2 * scores / (target.memory_bandwidth * target.reduction_bandwidth_fraction) + \
        target.launch_overhead
    copies = sum(2 * sizes[w] / target.memory_bandwidth + target.launch_overhead for w in copied)
    return (qk + softmax + pv) / target.attention_unfused_efficiency + copies


def ranked_tiles(shape: AttentionShape, target: Target, limit: int | None = None,
                 splits: int | None = None, decode: bool = False) -> list[AttentionTile]:
    """The legal tiles, fastest first (ties: larger query tiles, then fewer
    stages, then fewer splits)."""
    tiles = legal_tiles(shape, target, limit, splits, decode)
    return sorted(tiles, key=lambda t: (fused_time(t, shape, target), -t.block_q, t.stages,
                                        t.splits, -t.block_k, t.rows, t.cols))


def choose_tile(shape: AttentionShape, target: Target, splits: int | None = None,
                decode: bool = False) -> AttentionTile | str:
    """The fastest legal tile (with `splits` chunks where given; the decode
    tiles among them with `decode`), or the reason none fits."""
    tiles = ranked_tiles(shape, target, splits=splits, decode=decode)
    if tiles:
        return tiles[0]
    small = AttentionTile(BLOCK_Q[0], BLOCK_K[0], ROWS[0], COLS[0])
    need = shared_bytes(small, shape.d, shape.dv, shape.element)
    regs = attention_registers(small, shape.d, shape.dv, shape.params).registers
    limit = target.shared_memory_per_block
    return (f"head dim {shape.d} (values {shape.dv}) is too large: the smallest tile needs "
            f"{need} bytes of shared memory (limit {limit}) and ~{regs} registers per thread "
            f"(budget {target.register_budget})")


def tile_kind(tile: AttentionTile, shape: AttentionShape, target: Target
              ) -> tuple[str, int, bool, bool]:
    """(engine, stages, whether the tile needs dynamic shared memory, whether it splits)."""
    return (tile.engine, tile.stages,
            shared_bytes(tile, shape.d, shape.dv, shape.element) > target.static_shared_limit,
            tile.splits > 1)


def candidate_order(tiles: list[AttentionTile], shape: AttentionShape, target: Target
                    ) -> list[AttentionTile]:
    """`tiles` (fastest first) with the first of each `tile_kind` moved to
    the front, in their order: the model does not know how much the
    prefetch of `stages = 2` or the larger dynamic tiles gain, a GPU does."""
    seen: set[tuple[str, int, bool, bool]] = set()
    heads: list[AttentionTile] = []
    rest: list[AttentionTile] = []
    for t in tiles:
        kind = tile_kind(t, shape, target)
        (rest if kind in seen else heads).append(t)
        seen.add(kind)
    return heads + rest


def attention_candidates(group: GroupOp, target: Target, limit: int,
                         shared_limit: int | None = None) -> list[AttentionSchedule]:
    """Up to `limit` legal schedules of an `attention` group on `target`
    (within `shared_limit` bytes of shared memory, default the target's),
    the cost model's choice first, then the fastest of each other kind
    (`candidate_order`): what an autotuner times."""
    shape = group_shape(group)
    tiles = candidate_order(ranked_tiles(shape, target, shared_limit), shape, target)
    return [t.attr() for t in tiles[:max(0, limit)]]
