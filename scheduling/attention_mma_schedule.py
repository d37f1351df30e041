"""What an mma attention tile (`codegen/attention_mma.py`) costs the SM:
its shared tiles, registers and the clocks of one key step. The SIMT
engine's counterparts are in `scheduling/attention_schedule.py`, which calls
these for a tile whose `engine` is `mma`.

A block is `block_q / 16` warps; warp `w` holds queries `16 w .. 16 w + 15`
of the block and, per K/V tile, all `block_k` keys of their scores: a
thread holds `block_k / 2` scores and `dv / 2` output accumulators across
the key loop, and reads its Q fragments each step. The shared tiles are Q
(in the order of the warps' fragments: a lane's 16-byte vector per 8 head
dims, `codegen/attention_mma.py`), K (`[key][dim]`) and Vᵀ (`[dim][key]`),
f32; K's and Vᵀ's rows are padded to 8 (mod 16) words: a warp's 8-byte
fragment loads (`ld_pair`, lanes `g = lane // 4` on rows and `2 (lane % 4)`
on words) then hit distinct banks in each half-warp.

f32 operands are split into their TF32 parts where they are staged (once per
block, not in each warp that reads them): Q, K and Vᵀ then have a second
tile of the same layout holding the small parts, `split_offsets` words
after the big ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fusec.analysis.targets import Target
from fusec.scheduling.register_estimate import RegisterEstimate

if TYPE_CHECKING:
    from fusec.scheduling.attention_schedule import AttentionTile

MMA_ELEMENTS = ("f32", "f16", "bf16")
"""Operand element types the warp products take (f32 as TF32x3), which
`codegen/mma.py` writes helpers for."""
PRODUCT_FLOPS = 2 * 16 * 8 * 8  # one mma.m16n8k8
TF32_PASSES = 3  # an f32 product is three TF32 products (`codegen/mma.py`)
PAIR_ROW = 16  # rows are 8 (mod PAIR_ROW) words: conflict-free 8-byte fragment loads
# Issue model: warp instructions per score besides the products (score ops,
# row max, subtract, exp (2), row sum), per TF32 operand split (two
# conversions and a subtract), and per staged element (index math, global
# load, shared store).
SCORE_INSTRS = 8
SPLIT_INSTRS = 3
STAGE_INSTRS = 6
# Register model: the scores and output accumulators a thread holds across
# the key loop, plus a base, at least a floor: ptxas (`-arch=sm_90 -v`,
# 2026-12-01, B8 H12 S512, one stage) gave, head dim / tile / type:
# registers (model): 32 / 128x64 / f32 138 (128); 64 / 32x32 / f32 128 (128),
# 64x32 f32 133 (128), 64x64 f32 176 (144), 128x64 f32 168 (144), 128x64
# bf16 172 (144), 64x64 bf16 168 (144), 32x32 f16 134 (128); 96 / 64x64 /
# f32 137 (160); 128 / 128x64 / f32 168 (176), 64x32 bf16 168 (160); 256 /
# 64x32 / f32 254 (224), 128x32 bf16 255 (224), 64x64 f32 255 and 128
# bytes spilled (240). ptxas spends what it is given on scheduling (the
# same 168 at head dims 64 and 128), so the fit is within 25% everywhere
# but not monotonic; `scheduling/attention.py` keeps a margin below the
# hardware limit. A two-stage tile (register prefetch) spilled at every
# size (f32 64x64: 6.5 KB; bf16 64x32: 800 bytes), so none is offered.
# With f32 operands split where they are staged (7ed9d0a), f32 gave: 64 /
# 32x32 103, 64x32 128, 128x32 107, 64x64 132, 128x64 174; 32 / 128x64 140;
# 96 / 64x64 168; 128 / 64x32 170, 128x64 176; 256 / 64x32 254, 64x64 255
# and 336 bytes spilled (model 242): the same fit holds (within 25% but
# for 32x32, 26%), and the margin still keeps the tile that spills out.
# With Q in fragment order (2974f31), unmasked, ptxas (model): 64 / 32x32
# 102 (128), 64x32 99 (128), 128x32 104 (128), 64x64 96 (144), 128x64 136
# (144); 32 / 128x64 96 (128); 96 / 64x64 140 (160); 128 / 64x32 178 (160),
# 128x64 177 (176); 256 / 64x32 245 (224); with attention.mlir's additive
# mask (its loads early in the step) 128x32 128, 128x64 159. The small tiles
# now sit below the floor (up to 50% under the model at 64x64); not refitted:
# a floor too high only undercounts the blocks of 64-thread tiles per SM.
MMA_BASE_REGISTERS = 80
MMA_MIN_REGISTERS = 128
MMA_PER_PREFETCHED = 2.5  # a prefetched value and its share of the addresses


def mma_problem(d: int, dv: int, element: str) -> str | None:
    """Why an attention with head dims `d`, `dv` on `element` operands
    cannot run on the mma engine, or None."""
    if element not in MMA_ELEMENTS:
        return f"operands of type {element} (the mma engine takes {', '.join(MMA_ELEMENTS)})"
    if d % 8 or dv % 8:
        return f"head dims {d} and {dv} must be multiples of 8"
    return None


def pair_padded(width: int) -> int:
    """A row of `width` words padded to 8 (mod 16)."""
    return width + (8 - width) % PAIR_ROW


def mma_widths(tile: AttentionTile, d: int) -> tuple[int, int, int]:
    """Row lengths of the Q, K and Vᵀ tiles (Q's rows are whole: it is kept
    in fragment order, `codegen/attention_mma.py`)."""
    return d, pair_padded(d), pair_padded(tile.block_k)


def staged_parts(element: str) -> int:
    """Tiles each staged operand takes: 2 for f32 (TF32 big and small
    parts), else 1."""
    return 2 if element == "f32" else 1


def split_offsets(tile: AttentionTile, d: int, dv: int) -> tuple[int, int]:
    """Words from a big part to its small part: in Q's tile and in a K/V
    buffer (K, Vᵀ, then their small parts)."""
    wq, wk, wv = mma_widths(tile, d)
    return tile.block_q * wq, tile.block_k * wk + dv * wv


def mma_shared_words(tile: AttentionTile, d: int, dv: int,
                     element: str = "f32") -> dict[str, int]:
    """Words of the Q tile and of the K/V buffers (`stages` of them)."""
    q, kv = split_offsets(tile, d, dv)
    parts = staged_parts(element)
    return {"q": q * parts, "kv": kv * parts * tile.stages, "p": 0}


def mma_prefetch_values(tile: AttentionTile, d: int, dv: int) -> int:
    """Registers a thread holds the next K/V tile in (`stages = 2`)."""
    if tile.stages < 2:
        return 0
    return -(-tile.block_k * d // tile.threads) + -(-tile.block_k * dv // tile.threads)


def mma_registers(tile: AttentionTile, d: int, dv: int, params: int) -> RegisterEstimate:
    """Registers per thread: the scores and accumulators it holds across
    the key loop, plus a base (see above)."""
    parts = [("base", float(MMA_BASE_REGISTERS)), ("scores", tile.block_k / 2),
             ("accumulators", dv / 2),
             ("prefetch", MMA_PER_PREFETCHED * mma_prefetch_values(tile, d, dv)),
             ("side inputs", 2 * max(0, params - 4))]
    total = sum(v for _, v in parts)
    if total < MMA_MIN_REGISTERS:
        parts.append(("floor", MMA_MIN_REGISTERS - total))
    return RegisterEstimate(round(max(total, MMA_MIN_REGISTERS)),
                            tuple((k, round(v)) for k, v in parts))


def mma_step_clocks(tile: AttentionTile, target: Target, d: int, dv: int,
                    element: str) -> float:
    """Clocks one SM spends per block per K/V step: the larger of the
    tensor-core products (at `warp_mma_fraction` of the element type's
    library rate) and instruction issue (fragment loads, TF32 splits, the
    softmax of each score, the accumulators' rescale, the staging)."""
    warps = tile.block_q // 16
    products = (d // 8) * (tile.block_k // 8) + (tile.block_k // 8) * (dv // 8)
    passes = TF32_PASSES if element == "f32" else 1
    rate = target.library_gemm_rate(element, tf32=True) * target.warp_mma_fraction
    clock = target.fp32_flops / (2 * target.sms * target.fma_lanes_per_sm)
    per_sm_clock = rate / target.sms / clock
    mma_clocks = warps * products * passes * PRODUCT_FLOPS / per_sm_clock
    # fragments prepared: a B fragment per product, an A fragment per 8 head
    # dims (Q) and per 8 keys (P); f32 splits P's values (4 per A; Q, K and V
    # were split when staged), half packs each pair (1 per B, 2 per A)
    a_frags = d // 8 + tile.block_k // 8
    splits = tile.block_k // 8 * 4 * SPLIT_INSTRS if element == "f32" \
        else products + a_frags * 2
    parts = staged_parts(element)
    loads = (products + d // 8) * parts  # 8-byte B fragments, Q's A fragments
    scores = tile.block_k // 2 * SCORE_INSTRS + dv // 2
    staged = -(-tile.block_k * (d + dv) // tile.threads) * (
        STAGE_INSTRS + (parts - 1) * (SPLIT_INSTRS + 1))
    issue = warps * (products * passes + splits + loads + scores + staged)
    exps = tile.threads * (tile.block_k // 2 + 2)
    return max(mma_clocks, issue / target.warp_issue_per_sm, exps / target.sfu_lanes_per_sm)
