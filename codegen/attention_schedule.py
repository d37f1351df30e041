"""The tile of a fused attention kernel (`codegen/attention.py`) and what it
costs the SM: shared memory, registers and the clocks of one key step.
The choice among tiles is `scheduling/attention.py`.

A block owns `block_q` queries of one (batch, head); its `threads` form
`block_q / rows` row groups of `lanes = block_k / cols` consecutive threads.
Thread (`ty`, `tx`) holds the `rows x cols` scores of queries
`ty * rows + i` and keys `tx * cols + j` of each K/V tile (consecutive, so
that its fragments are 16-byte shared-memory loads), and the `rows x dims`
outputs of head dims `tx * dims + d`. The tile is the group's
`#fusion.attention` schedule attribute (`dialects/schedule.py`), read back
verbatim by the emitter:

```mlir
%o = fusion.group (...) {name = "attn0", kind = "attention", schedule =
    #fusion.attention<block_q = 64, block_k = 64, threads = 256, rows = 4, cols = 4,
                      stages = 2>} ...
```
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.ir import Operation

from fusec.analysis.targets import Target
from fusec.codegen.register_model import RegisterEstimate
from fusec.dialects.schedule import SCHEDULE_KEY, AttentionSchedule

WARP = 32
VECTOR = 4  # f32 words per 16-byte shared-memory access
ITEM = 4  # shared tiles hold f32 (half-precision operands are widened when staged)
STATIC_SHARED_LIMIT = 48 * 1024  # what a numba kernel may declare statically: past it
# the tiles are taken from dynamic shared memory (up to the target's per-block limit)
BANK_SKEW = 4  # transposed tiles' rows are padded to 4 (mod 32) words: staging stores hit
# 32 distinct banks when a warp writes 4 rows x 8 head dims.

# Register model: a least-squares fit to `ptxas -arch=sm_90 -v` (2026-12-01)
# over 45 kernels of this emitter: every legal tile of B8 H12 S512 D64 and 10
# random legal tiles each of head dims 8, 16, 32 and 128 (40 of 45 within
# +-25%, mean error 13%; the per-thread tile alone, the previous model, was
# off by -50% on every tile of 256 threads or more). ptxas unrolls the loops
# over the head dim and the staging loops, so the count does not follow the
# live values alone: it grows with the scores and accumulators a thread
# holds and with its row groups, and falls with wider per-thread key strips,
# larger staging steps, and head dims of 8 or less (fully unrolled).
ATTN_BASE = 117.0
ATTN_PER_SCORE = 2.887  # per score a thread holds (rows x cols)
ATTN_PER_ACC = 1.08  # per output accumulator (rows x dims)
ATTN_PER_STAGED = -0.399  # per K/V element a thread stages each key step
ATTN_PER_ROW_GROUP = 0.377  # per row group of the block (block_q / rows)
ATTN_SMALL_HEAD = -69.6  # head dim 8 or less
ATTN_SMALL_HEAD_DIM = 8
ATTN_PER_LOG2_HEAD = -8.217  # per doubling of the head dim
ATTN_PER_COL = -5.482  # per key column of the per-thread tile
ATTN_MIN_REGISTERS = 32  # ptxas never went below this on the corpus
# `stages = 2`: ptxas keeps the prefetched K/V values and their addresses
# live across the math. Up to 8 values a thread costs about one register
# each; past that about 10.6 more per value (ptxas -v, sm_90, B8 H12 S512
# D64, 2026-12-01: 8 values +5 over the one-stage tile, 16 values +88 and
# +93, 32 values 255 and spills).
ATTN_PREFETCH_FREE = 8
ATTN_PER_PREFETCH_PAST = 10.6
# Issue model: warp instructions besides the FMAs and fragment loads.
SOFTMAX_INSTRS = 8  # per score: score ops, max, subtract, exp (2), sum, P store
STAGE_INSTRS = 6  # per staged element: index math, global load, shared store


@dataclass(frozen=True)
class AttentionTile:
    """`block_q` queries per block, `block_k` keys per K/V tile, `rows x
    cols` scores per thread, `stages` 1 or 2 (see the module docstring)."""

    block_q: int
    block_k: int
    rows: int
    cols: int
    stages: int = 1

    @property
    def lanes(self) -> int:
        """Threads per row group: they share query rows."""
        return self.block_k // self.cols

    @property
    def row_groups(self) -> int:
        return self.block_q // self.rows

    @property
    def threads(self) -> int:
        return self.row_groups * self.lanes

    def dims(self, dv: int) -> int:
        """Output head dims a thread accumulates."""
        return -(-dv // self.lanes)

    def problem(self) -> str | None:
        """Why the tile cannot be emitted, or None."""
        lanes = self.lanes
        if min(self.block_q, self.block_k, self.rows, self.cols) < 1 or \
                self.block_q % self.rows or self.block_k % self.cols:
            return "rows must divide block_q and cols block_k"
        if lanes & (lanes - 1) or lanes > WARP or self.threads % min(WARP, self.threads):
            return "block_k / cols must be a power of two <= 32"
        if self.threads > 1024 or self.stages not in (1, 2):
            return "at most 1024 threads, stages 1 or 2"
        return None

    def text(self) -> str:
        return (f"{self.block_q} queries x {self.block_k} keys per block, {self.rows}x{self.cols} "
                f"scores per thread ({self.threads} threads), {self.stages} stage"
                + ("s" if self.stages > 1 else ""))

    def attr(self) -> AttentionSchedule:
        """The `#fusion.attention` schedule attribute recording this tile."""
        return AttentionSchedule.make(block_q=self.block_q, block_k=self.block_k,
                                      threads=self.threads, rows=self.rows, cols=self.cols,
                                      stages=self.stages)

    @staticmethod
    def of(attr: AttentionSchedule) -> AttentionTile:
        return AttentionTile(*(attr.int_field(k) for k in
                               ("block_q", "block_k", "rows", "cols", "stages")))


@dataclass(frozen=True)
class AttentionShape:
    """Sizes of one attention: batch x heads, queries, keys, head dims, and
    the bytes of an operand element and of an output element."""

    heads: int
    s: int
    skv: int
    d: int
    dv: int
    params: int = 5
    item: int = 4


def recorded_tile(group: Operation) -> AttentionTile | None:
    """The tile of `group`'s `#fusion.attention` schedule, if it has one."""
    attr = group.attributes.get(SCHEDULE_KEY)
    return AttentionTile.of(attr) if isinstance(attr, AttentionSchedule) else None


def padded(width: int) -> int:
    """A transposed tile's row length: >= width, 4 (mod 32) words."""
    return width + (BANK_SKEW - width) % WARP


def vwidth(tile: AttentionTile, dv: int) -> int:
    """Columns of the V tile: every lane's dims (zero past `dv`), whole vectors."""
    w = tile.dims(dv) * tile.lanes
    return w + (-w) % VECTOR


def p_width(tile: AttentionTile) -> int:
    """Row length of the probability tile `P[key][query]`."""
    return tile.block_q + VECTOR


def shared_words(tile: AttentionTile, d: int, dv: int) -> dict[str, int]:
    """Words of each shared tile on the GPU: Qᵀ, Kᵀ and V (`stages` buffers
    each) and P (the simulator's row exchange is not counted)."""
    kv = padded(tile.block_k) * d + tile.block_k * vwidth(tile, dv)
    return {"q": padded(tile.block_q) * d, "kv": kv * tile.stages,
            "p": tile.block_k * p_width(tile)}


def shared_bytes(tile: AttentionTile, d: int, dv: int) -> int:
    """Static shared memory of the kernel (see `shared_words`)."""
    return sum(shared_words(tile, d, dv).values()) * ITEM


def prefetch_values(tile: AttentionTile, d: int, dv: int) -> int:
    """Registers a thread holds the next K/V tile in (`stages = 2`)."""
    if tile.stages < 2:
        return 0
    k = -(-tile.block_k * d // tile.threads)
    v = -(-tile.block_k * vwidth(tile, dv) // tile.threads)
    return k + v


def attention_registers(tile: AttentionTile, d: int, dv: int, params: int) -> RegisterEstimate:
    """Registers per thread, by the fit above (`params`, the kernel's
    parameters, did not improve it and is kept for the callers)."""
    parts = [("base", ATTN_BASE),
             ("scores", ATTN_PER_SCORE * tile.rows * tile.cols),
             ("accumulators", ATTN_PER_ACC * tile.rows * tile.dims(dv)),
             ("staging", ATTN_PER_STAGED * tile.block_k * (d + dv) / tile.threads),
             ("row groups", ATTN_PER_ROW_GROUP * tile.row_groups),
             ("head dim", ATTN_PER_LOG2_HEAD * math.log2(max(1, d))
              + (ATTN_SMALL_HEAD if d <= ATTN_SMALL_HEAD_DIM else 0.0)),
             ("key columns", ATTN_PER_COL * tile.cols),
             ("prefetch", _prefetch_registers(prefetch_values(tile, d, dv)))]
    total = sum(v for _, v in parts)
    if total < ATTN_MIN_REGISTERS:
        parts.append(("floor", ATTN_MIN_REGISTERS - total))
    return RegisterEstimate(round(max(total, ATTN_MIN_REGISTERS)),
                            tuple((k, round(v)) for k, v in parts))


def _prefetch_registers(values: int) -> float:
    """Registers of `values` prefetched K/V elements per thread (see above)."""
    return values + ATTN_PER_PREFETCH_PAST * max(0, values - ATTN_PREFETCH_FREE)


def _vectors(n: int) -> int:
    return -(-n // VECTOR)


def step_clocks(tile: AttentionTile, target: Target, d: int, dv: int) -> float:
    """Clocks one SM spends per block per K/V step: the largest of FMA
    issue, shared-memory wavefronts (a warp's 16-byte fragment loads:
    distinct words / 32 banks), exponentials and instruction issue (FMAs,
    fragment loads, the softmax of each score, the accumulators' rescale,
    the staging of the K/V tile)."""
    warps = -(-tile.threads // WARP)
    dims = tile.dims(dv)
    groups = max(1, WARP // tile.lanes)  # row groups per warp (they read distinct Q/P rows)
    lanes = min(tile.lanes, WARP)
    fmas = d * tile.rows * tile.cols + tile.block_k * tile.rows * dims
    fma_clocks = tile.threads * fmas / target.fma_lanes_per_sm
    words = d * (groups * tile.rows + lanes * tile.cols)  # Q and K fragments
    words += tile.block_k * (groups * tile.rows + lanes * dims)  # P and V fragments
    shared_clocks = warps * words / target.shared_lanes_per_sm
    loads = d * (_vectors(tile.rows) + _vectors(tile.cols)) + \
        tile.block_k * (_vectors(tile.rows) + _vectors(dims))
    staged = -(-tile.block_k * (d + vwidth(tile, dv)) // tile.threads)
    other = tile.rows * tile.cols * SOFTMAX_INSTRS + tile.rows * dims + staged * STAGE_INSTRS
    issue_clocks = warps * (fmas + loads + other) / target.warp_issue_per_sm
    exps = tile.threads * tile.rows * (tile.cols + 1)
    return max(fma_clocks, shared_clocks, issue_clocks, exps / target.sfu_lanes_per_sm)
