"""Choosing the tile of a fused attention (`codegen/attention.py`) for a
target, and whether fusing pays at all.

- `legal_tiles`: every tile of the search space (`BLOCK_Q x BLOCK_K x ROWS x
  COLS x STAGES`) that the emitter accepts and that fits the target's shared
  memory per block (past the static 48 KiB the kernel takes its tiles from
  dynamic shared memory) and register budget;
- `fused_time`: the modelled time of one tile (`codegen/attention_schedule.
  step_clocks` per key step and block, times the waves the grid needs at the
  occupancy the tile's registers, shared memory and threads allow, over
  `attention_efficiency`), never below the DRAM time of Q, K, V and O;
- `unfused_time`: the three-kernel path (QK GEMM with its score ops, the
  softmax as a row reduction, PV GEMM; the scores through memory), each
  GEMM priced as the SIMT kernel or the library GEMM, as `tile-and-promote`
  will choose it (in f16/bf16 the library's tensor cores make this path
  the faster one);
- `choose_tile`: the fastest legal tile; `attention_candidates`: the legal
  tiles of a group as schedule attributes (for autotuning): the fastest of
  each kind first (`candidate_order`: static or dynamic shared memory, one
  or two stages), so that a tuner timing a few sees each kind.
"""

from __future__ import annotations

import itertools

from fusec.analysis.cost_model import gemm_choice
from fusec.analysis.targets import Target
from fusec.codegen.attention_mma_schedule import mma_problem
from fusec.codegen.attention_schedule import (
    AttentionShape,
    AttentionTile,
    attention_registers,
    shared_bytes,
    step_clocks,
)
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import AttentionSchedule

BLOCK_Q = (32, 64, 128)
BLOCK_K = (16, 32, 64)
ROWS = (2, 4, 8)
COLS = (2, 4, 8)
STAGES = (1, 2)  # 2: the next K/V tile prefetched into registers (the register model
# counts them, so the tiles that would spill are not legal)
MMA_BLOCK_Q = (32, 64, 128)  # tensor-core tiles: 16 queries per warp
MMA_BLOCK_K = (32, 64)  # one stage: a register prefetch spilled at every size measured
MMA_CAPABILITY = (8, 0)  # TF32 and bf16 mma.sync
MMA_REGISTER_MARGIN = 16  # below the thread's limit: ptxas spilled 128 bytes at 255
# registers where the model said 240 (`codegen/attention_mma_schedule.py`)
MIN_THREADS = 64  # two warps: fewer leaves the SM's schedulers idle
MAX_THREADS = 512
REGISTER_GRANULE = 8  # registers are allocated per thread in units of 8
MAX_BLOCKS_PER_SM = 32
# The three-kernel path: the scores are written by the QK kernel, read and
# written by the softmax, read by the PV kernel.
SCORE_PASSES = 4


def legal_tiles(shape: AttentionShape, target: Target, limit: int | None = None
                ) -> list[AttentionTile]:
    """Every tile the emitter accepts that fits `limit` bytes of shared
    memory (default: the target's per block, dynamic shared memory included)
    and the target's register budget; block_q no larger than needed for `s`
    queries."""
    smem = min(limit or target.shared_memory_per_block, target.shared_memory_per_block)
    tiles = []
    simt = [AttentionTile(*t) for t in itertools.product(BLOCK_Q, BLOCK_K, ROWS, COLS, STAGES)]
    mma = [AttentionTile.mma(bq, bk) for bq, bk in itertools.product(MMA_BLOCK_Q, MMA_BLOCK_K)]
    if target.compute_capability < MMA_CAPABILITY or \
            mma_problem(shape.d, shape.dv, shape.element) is not None:
        mma = []
    for t in simt + mma:
        bq, bk = t.block_q, t.block_k
        if t.problem() is not None or not MIN_THREADS <= t.threads <= MAX_THREADS:
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


def resident_blocks(tile: AttentionTile, shape: AttentionShape, target: Target) -> int:
    """Blocks of this tile one SM holds at once."""
    regs = attention_registers(tile, shape.d, shape.dv, shape.params).registers
    regs = -(-regs // REGISTER_GRANULE) * REGISTER_GRANULE
    by_regs = target.registers_per_sm // (regs * tile.threads)
    smem = shared_bytes(tile, shape.d, shape.dv, shape.element)
    by_smem = target.shared_memory_per_sm // max(1, smem)
    by_threads = target.max_threads_per_sm // tile.threads
    return max(1, min(by_regs, by_smem, by_threads, MAX_BLOCKS_PER_SM))


def clock_hz(target: Target) -> float:
    """The SM clock the fp32 rate implies (2 flops per FMA lane per clock)."""
    return target.fp32_flops / (2 * target.sms * target.fma_lanes_per_sm)


def fused_time(tile: AttentionTile, shape: AttentionShape, target: Target) -> float:
    """Seconds of the fused kernel with `tile` (see the module docstring)."""
    blocks = shape.heads * -(-shape.s // tile.block_q)
    resident = resident_blocks(tile, shape, target)
    waves = -(-blocks // (target.sms * resident))
    per_block = -(-shape.skv // tile.block_k) * step_clocks(tile, target, shape.d, shape.dv,
                                                            shape.element)
    # a wave's `resident` blocks share the SM's pipes
    busy = waves * min(resident, -(-blocks // target.sms)) * per_block
    efficiency = target.attention_mma_efficiency if tile.engine == "mma" else \
        target.attention_efficiency
    compute = busy / clock_hz(target) / efficiency
    io = shape.heads * (shape.s * (shape.d + shape.dv) + shape.skv * (shape.d + shape.dv))
    return max(compute, io * shape.item / target.memory_bandwidth) + target.launch_overhead


def unfused_time(shape: AttentionShape, target: Target, gemm: str = "fused",
                 library: bool = False, tf32: bool = False) -> float:
    """Seconds of the three-kernel path: two GEMMs and the softmax, at
    `attention_unfused_efficiency` of their roofline. Each GEMM is priced
    as `tile-and-promote` will choose it (`gemm` mode, whether the library
    is available, `tf32`): fusec's SIMT GEMM, or a library GEMM at the
    element type's rate (tensor cores for f16/bf16)."""
    h, s, skv, d, dv, item = (shape.heads, shape.s, shape.skv, shape.d, shape.dv, shape.item)
    scores = h * s * skv * item

    def matmul(flops: float, operand_bytes: int) -> float:
        choice = gemm_choice(target, flops, operand_bytes, scores, 0, gemm, library,
                             shape.element, tf32)
        return choice.t_library if choice.library else choice.t_fused

    qk = matmul(2 * h * s * skv * d, h * (s + skv) * d * item)
    pv = matmul(2 * h * s * skv * dv, h * (skv + s) * dv * item)
    softmax = 2 * scores / (target.memory_bandwidth * target.reduction_bandwidth_fraction) + \
        target.launch_overhead
    return (qk + softmax + pv) / target.attention_unfused_efficiency


def ranked_tiles(shape: AttentionShape, target: Target, limit: int | None = None
                 ) -> list[AttentionTile]:
    """The legal tiles, fastest first (ties: larger query tiles, then fewer stages)."""
    tiles = legal_tiles(shape, target, limit)
    return sorted(tiles, key=lambda t: (fused_time(t, shape, target), -t.block_q, t.stages,
                                        -t.block_k, t.rows, t.cols))


def choose_tile(shape: AttentionShape, target: Target) -> AttentionTile | str:
    """The fastest legal tile, or the reason none fits."""
    tiles = ranked_tiles(shape, target)
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
              ) -> tuple[str, int, bool]:
    """(engine, stages, whether the tile needs dynamic shared memory)."""
    return (tile.engine, tile.stages,
            shared_bytes(tile, shape.d, shape.dv, shape.element) > target.static_shared_limit)


def candidate_order(tiles: list[AttentionTile], shape: AttentionShape, target: Target
                    ) -> list[AttentionTile]:
    """`tiles` (fastest first) with the first of each `tile_kind` moved to
    the front, in their order: the model does not know how much the
    prefetch of `stages = 2` or the larger dynamic tiles gain, a GPU does."""
    seen: set[tuple[str, int, bool]] = set()
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
    from fusec.codegen.attention import group_shape  # imports scheduling via the emitter

    shape = group_shape(group)
    tiles = candidate_order(ranked_tiles(shape, target, shared_limit), shape, target)
    return [t.attr() for t in tiles[:max(0, limit)]]
