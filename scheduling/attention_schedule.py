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

from fusec.analysis.targets import WARP_SIZE, Target
from fusec.dialects.schedule import SCHEDULE_KEY, AttentionSchedule
from fusec.scheduling.attention_decode_schedule import (
    decode_problem,
    decode_registers,
    decode_shared_words,
)
from fusec.scheduling.attention_mma_schedule import (
    mma_prefetch_values,
    mma_registers,
    mma_shared_words,
    mma_step_clocks,
)
from fusec.scheduling.register_estimate import RegisterEstimate

MMA_ROWS = 16  # queries per warp of an mma tile (the m of mma.m16n8k8)
MMA_K = 8  # keys (and head dims) per product of an mma tile (its n and k)
VECTOR = 4  # f32 words per 16-byte shared-memory access
ITEM = 4  # shared tiles hold f32 (half-precision operands are widened when staged)
BANK_SKEW = 4  # transposed tiles' rows are padded to 4 (mod 32) words: staging stores hit
# 32 distinct banks when a warp writes 4 rows x 8 head dims.

# Register model: a least-squares fit (relative error) to `ptxas -arch=sm_90
# -v` (2026-12-01) over 169 kernels of this emitter, with and without an
# additive mask: head dims 32, 64 and 128, f32 and bf16, static and dynamic
# shared memory, one and two stages (tests/test_attention_registers.py holds
# them): 153 of 169 within +-25%, mean error 13%, at most 36% under. ptxas
# unrolls the staging loops, so the count grows with the values a thread
# stages at once (up to 4 K and 4 V elements, up to 8 Q elements in flight)
# and with the block's threads (their index math), besides the accumulators
# a thread holds and the side inputs' indices (a query per row, a key per
# column), and falls with the head dim (longer loops are unrolled less).
ATTN_BASE = -0.755
ATTN_PER_ACC = 2.745  # per output accumulator (rows x dims)
ATTN_PER_LOG2_HEAD = -29.884  # per doubling of the head dim
ATTN_PER_STAGED = 9.492  # per K/V element staged at once (up to ATTN_STAGED_IN_FLIGHT each)
ATTN_STAGED_IN_FLIGHT = 4
ATTN_PER_LOG2_THREADS = 16.685  # per doubling of the block's threads
ATTN_PER_DIM = -0.693  # per output head dim a thread accumulates
ATTN_PER_Q_STAGED = 1.263  # per Q element staged at once (up to ATTN_Q_IN_FLIGHT)
ATTN_Q_IN_FLIGHT = 8
ATTN_TWO_STAGES = 20.824  # `stages = 2`: the prefetch's values and addresses (up to 8 values)
ATTN_PER_SIDE_INDEX = 1.595  # per row and column of the tile, per side input (a mask)
ATTN_PLAIN_PARAMS = 4  # Q, K, V and the output: the parameters past these are side inputs
ATTN_MIN_REGISTERS = 32  # ptxas never went below this on the corpus
# `stages = 2` past 8 prefetched values a thread (no tile of the fit above
# has more): about 10.6 more registers per value (ptxas -v, sm_90, B8 H12
# S512 D64, 2026-12-01: 16 values +88 and +93 over the one-stage tile, 32
# values 255 and spills).
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
    engine: str = "simt"  # or "mma": warp tiles of 16 queries on tensor cores; or
    # "decode": a warp per key stream, lanes on head dims (`attention_decode_schedule.py`)
    splits: int = 1  # > 1: split-KV, a block per chunk of keys plus a combine kernel

    @staticmethod
    def mma(block_q: int, block_k: int, stages: int = 1) -> AttentionTile:
        """The tensor-core tile: a warp per 16 queries, each holding all
        `block_k` keys of its scores."""
        return AttentionTile(block_q, block_k, MMA_ROWS, block_k, stages, "mma")

    @staticmethod
    def decode(queries: int, warps: int, unroll: int, splits: int = 1) -> AttentionTile:
        """The decode tile: `warps` warps each walking its keys `unroll` at
        a time, every warp holding all `queries` queries."""
        return AttentionTile(queries, warps * unroll, queries, unroll, 1, "decode", splits)

    @property
    def lanes(self) -> int:
        """Threads per row group: they share query rows."""
        return self.block_k // self.cols

    @property
    def row_groups(self) -> int:
        return self.block_q // self.rows

    @property
    def threads(self) -> int:
        if self.engine == "mma":
            return self.block_q // MMA_ROWS * WARP_SIZE
        if self.engine == "decode":
            return self.lanes * WARP_SIZE  # lanes: the warps
        return self.row_groups * self.lanes

    def dims(self, dv: int) -> int:
        """Output head dims a thread accumulates."""
        return -(-dv // self.lanes)

    def problem(self, target: Target) -> str | None:
        """Why the tile cannot be emitted on `target`, or None."""
        most = target.max_threads_per_block
        if self.engine == "mma":
            if self.rows != MMA_ROWS or self.cols != self.block_k or self.block_q % MMA_ROWS \
                    or self.block_k % MMA_K or self.block_k < MMA_K:
                return "an mma tile has 16 rows, cols = block_k, and block_k a multiple of 8"
            if self.threads > most or self.stages not in (1, 2):
                return f"at most {most} threads, stages 1 or 2"
            if self.splits != 1:
                return "an mma tile takes no splits (split-KV is a simt schedule)"
            return None
        if self.engine == "decode":
            return decode_problem(self.block_q, self.block_k, self.rows, self.cols, self.stages,
                                  self.splits, most)
        if self.splits < 1:
            return "splits must be >= 1"
        lanes = self.lanes
        if min(self.block_q, self.block_k, self.rows, self.cols) < 1 or \
                self.block_q % self.rows or self.block_k % self.cols:
            return "rows must divide block_q and cols block_k"
        if lanes & (lanes - 1) or lanes > WARP_SIZE or self.threads % min(WARP_SIZE, self.threads):
            return "block_k / cols must be a power of two <= 32"
        if self.threads > most or self.stages not in (1, 2):
            return f"at most {most} threads, stages 1 or 2"
        return None

    def text(self) -> str:
        if self.engine == "mma":
            return (f"{self.block_q} queries x {self.block_k} keys per block on tensor cores, "
                    f"16 queries per warp ({self.threads} threads), {self.stages} stage"
                    + ("s" if self.stages > 1 else ""))
        if self.engine == "decode":
            return (f"decode: {self.block_q} quer{'y' if self.block_q == 1 else 'ies'} per "
                    f"block, {self.lanes} warps each walking its keys {self.cols} at a time "
                    f"({self.threads} threads)"
                    + (f", keys split over {self.splits} blocks" if self.splits > 1 else ""))
        return (f"{self.block_q} queries x {self.block_k} keys per block, {self.rows}x{self.cols} "
                f"scores per thread ({self.threads} threads), {self.stages} stage"
                + ("s" if self.stages > 1 else "")
                + (f", keys split over {self.splits} blocks" if self.splits > 1 else ""))

    def attr(self) -> AttentionSchedule:
        """The `#fusion.attention` schedule attribute recording this tile."""
        return AttentionSchedule.make(block_q=self.block_q, block_k=self.block_k,
                                      threads=self.threads, rows=self.rows, cols=self.cols,
                                      stages=self.stages, engine=self.engine,
                                      splits=self.splits)

    @staticmethod
    def of(attr: AttentionSchedule) -> AttentionTile:
        return AttentionTile(*(attr.int_field(k) for k in
                               ("block_q", "block_k", "rows", "cols", "stages")),
                             engine=attr.str_field("engine"), splits=attr.int_field("splits"))

    def split_plan(self, skv: int) -> SplitPlan:
        """How `skv` keys are cut into this tile's `splits` chunks."""
        return SplitPlan.of(skv, self.block_k, self.splits)


@dataclass(frozen=True)
class SplitPlan:
    """Split-KV: `steps` K/V tiles of `block_k` keys cut into `splits`
    chunks of `chunk_tiles` tiles (the last may be shorter, none is empty:
    a schedule's splits past the tiles are fewer chunks)."""

    steps: int
    chunk_tiles: int
    splits: int
    block_k: int

    @property
    def chunk_keys(self) -> int:
        return self.chunk_tiles * self.block_k

    @staticmethod
    def of(skv: int, block_k: int, splits: int) -> SplitPlan:
        steps = -(-skv // block_k)
        chunk = -(-steps // max(1, min(splits, steps)))
        return SplitPlan(steps, chunk, -(-steps // chunk), block_k)


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
    element: str = "f32"  # the operands' element type (`dialects/element_types.py`)
    relayout: tuple[str, ...] = ()
    """The operands ("q", "k", "v") and the output ("out") that a library
    GEMM of the three-kernel path cannot read or write in place (a head
    sliced out of a packed projection, heads moved past the tokens): that
    path copies each once (`scheduling/attention.py` `unfused_time`); the
    fused kernel reads and writes them through their views."""


def recorded_tile(group: Operation) -> AttentionTile | None:
    """The tile of `group`'s `#fusion.attention` schedule, if it has one."""
    attr = group.attributes.get(SCHEDULE_KEY)
    return AttentionTile.of(attr) if isinstance(attr, AttentionSchedule) else None


def padded(width: int) -> int:
    """A transposed tile's row length: >= width, 4 (mod 32) words."""
    return width + (BANK_SKEW - width) % WARP_SIZE


def vwidth(tile: AttentionTile, dv: int) -> int:
    """Columns of the V tile: every lane's dims (zero past `dv`), whole vectors."""
    w = tile.dims(dv) * tile.lanes
    return w + (-w) % VECTOR


def p_width(tile: AttentionTile) -> int:
    """Row length of the probability tile `P[key][query]`."""
    return tile.block_q + VECTOR


def shared_words(tile: AttentionTile, d: int, dv: int,
                 element: str = "f32") -> dict[str, int]:
    """Words of each shared tile on the GPU: Qᵀ, Kᵀ and V (`stages` buffers
    each) and P (the simulator's row exchange is not counted); an mma
    tile's depend on the operands' `element` type."""
    if tile.engine == "mma":
        return mma_shared_words(tile, d, dv, element)
    if tile.engine == "decode":
        return {"q": 0, "kv": 0, "p": 0, "warps": decode_shared_words(tile.rows, tile.lanes, dv)}
    kv = padded(tile.block_k) * d + tile.block_k * vwidth(tile, dv)
    return {"q": padded(tile.block_q) * d, "kv": kv * tile.stages,
            "p": tile.block_k * p_width(tile)}


def shared_bytes(tile: AttentionTile, d: int, dv: int, element: str = "f32") -> int:
    """Static shared memory of the kernel (see `shared_words`)."""
    return sum(shared_words(tile, d, dv, element).values()) * ITEM


def prefetch_values(tile: AttentionTile, d: int, dv: int) -> int:
    """Registers a thread holds the next K/V tile in (`stages = 2`)."""
    if tile.engine == "mma":
        return mma_prefetch_values(tile, d, dv)
    if tile.engine == "decode":
        return 0
    if tile.stages < 2:
        return 0
    k = -(-tile.block_k * d // tile.threads)
    v = -(-tile.block_k * vwidth(tile, dv) // tile.threads)
    return k + v


def attention_registers(tile: AttentionTile, d: int, dv: int, params: int) -> RegisterEstimate:
    """Registers per thread, by the fit above (`params`: the kernel's
    parameters, side inputs past Q, K, V and the output)."""
    if tile.engine == "mma":
        return mma_registers(tile, d, dv, params)
    if tile.engine == "decode":
        return decode_registers(tile.rows, tile.cols, d, dv, params)
    dims = tile.dims(dv)
    k = -(-tile.block_k * d // tile.threads)
    v = -(-tile.block_k * vwidth(tile, dv) // tile.threads)
    q = -(-tile.block_q * d // tile.threads)
    parts = [("base", ATTN_BASE),
             ("accumulators", ATTN_PER_ACC * tile.rows * dims + ATTN_PER_DIM * dims),
             ("head dim", ATTN_PER_LOG2_HEAD * math.log2(max(1, d))),
             ("staging", ATTN_PER_STAGED * (min(k, ATTN_STAGED_IN_FLIGHT)
                                            + min(v, ATTN_STAGED_IN_FLIGHT))
              + ATTN_PER_Q_STAGED * min(q, ATTN_Q_IN_FLIGHT)),
             ("threads", ATTN_PER_LOG2_THREADS * math.log2(tile.threads)),
             ("side inputs", ATTN_PER_SIDE_INDEX * (tile.rows + tile.cols)
              * max(0, params - ATTN_PLAIN_PARAMS)),
             ("prefetch", _prefetch_registers(prefetch_values(tile, d, dv)))]
    total = sum(v for _, v in parts)
    if total < ATTN_MIN_REGISTERS:
        parts.append(("floor", ATTN_MIN_REGISTERS - total))
    return RegisterEstimate(round(max(total, ATTN_MIN_REGISTERS)),
                            tuple((k, round(v)) for k, v in parts))


def _prefetch_registers(values: int) -> float:
    """Registers of `values` prefetched K/V elements per thread (see above)."""
    if values == 0:
        return 0.0
    return ATTN_TWO_STAGES + ATTN_PER_PREFETCH_PAST * max(0, values - ATTN_PREFETCH_FREE)


def _vectors(n: int) -> int:
    return -(-n // VECTOR)


def step_clocks(tile: AttentionTile, target: Target, d: int, dv: int,
                element: str = "f32") -> float:
    """Clocks one SM spends per block per K/V step: the largest of FMA
    issue, shared-memory wavefronts (a warp's 16-byte fragment loads:
    distinct words / 32 banks), exponentials and instruction issue (FMAs,
    fragment loads, the softmax of each score, the accumulators' rescale,
    the staging of the K/V tile). A sum of issue and the fragment loads'
    bank-exact wavefronts ranked one sweep's 9 tiles better, but put first
    tiles that ran slowest (64x64 and 32x64 with 8x4 scores per thread: 0.455
    and 0.772 ms against 0.322 for the best): over the 17 tiles measured on
    the H200 it ordered 81 of 136 pairs as they ran, this largest-of 87.
    An mma tile: `codegen/attention_mma_schedule.mma_step_clocks`."""
    if tile.engine == "mma":
        return mma_step_clocks(tile, target, d, dv, element)
    warps = -(-tile.threads // WARP_SIZE)
    dims = tile.dims(dv)
    groups = max(1, WARP_SIZE // tile.lanes)  # row groups per warp (they read distinct Q/P rows)
    lanes = min(tile.lanes, WARP_SIZE)
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
