"""Sizes and costs of the decode attention tile (`engine = "decode"`,
`codegen/attention_decode.py`), in plain numbers so that
`scheduling/attention_schedule.py` can use them without a cycle.

The tile is recorded in the group's `#fusion.attention` schedule as
`block_q = rows` queries (at most DECODE_MAX_QUERIES), `cols` keys per warp
per loop iteration (the unroll: that many K and V rows in flight),
`block_k = warps * cols` keys per block per iteration and `threads = 32 *
warps`; `splits` cuts the keys into chunks of whole iterations as for
split-KV (`codegen/attention_split.py`).
"""

from __future__ import annotations

from fusec.analysis.targets import WARP_SIZE
from fusec.scheduling.register_estimate import RegisterEstimate

DECODE_MAX_QUERIES = 4  # queries a warp holds (Q and the outputs stay in registers)
DECODE_WARPS = (2, 4, 8)
DECODE_MAX_UNROLL = 8
# Register estimate (not fitted yet: no ptxas corpus of this kernel): the
# index math and loop state, plus one register per value a lane holds: Q and
# the outputs of each query, the K and V rows in flight, the scores, and a
# side input's index per score.
DECODE_BASE_REGISTERS = 40
DECODE_MIN_REGISTERS = 32


def decode_problem(block_q: int, block_k: int, rows: int, cols: int, stages: int,
                   splits: int, max_threads: int) -> str | None:
    """Why a decode tile cannot be emitted in blocks of at most `max_threads`
    threads, or None."""
    if not 1 <= rows <= DECODE_MAX_QUERIES or block_q != rows:
        return f"a decode tile has block_q = rows <= {DECODE_MAX_QUERIES} queries"
    if not 1 <= cols <= DECODE_MAX_UNROLL or block_k % cols:
        return f"a decode tile has cols (keys per warp step) <= {DECODE_MAX_UNROLL} " \
               "dividing block_k"
    warps = block_k // cols
    if not 1 <= warps <= max_threads // WARP_SIZE:
        return f"a decode tile has 1 to {max_threads // WARP_SIZE} warps (block_k / cols)"
    if stages != 1 or splits < 1:
        return "a decode tile has one stage and splits >= 1"
    return None


def decode_head_problem(d: int, dv: int) -> str | None:
    """Why head dims `d`, `dv` cannot take a decode tile, or None."""
    if d % WARP_SIZE or dv % WARP_SIZE or d < WARP_SIZE or dv < WARP_SIZE:
        return f"a decode tile needs head dims that are multiples of {WARP_SIZE} (D {d}, Dv {dv})"
    return None


def decode_shared_words(rows: int, warps: int, dv: int) -> int:
    """The warps' (m, l, o) of each query, combined at the end (GPU words)."""
    return warps * rows * (dv + 2)


def decode_registers(rows: int, cols: int, d: int, dv: int, params: int) -> RegisterEstimate:
    """Registers per thread (see the constants above)."""
    dl, dvl = -(-d // WARP_SIZE), -(-dv // WARP_SIZE)
    parts = [("base", DECODE_BASE_REGISTERS),
             ("q and outputs", rows * (dl + dvl + 2)),
             ("rows in flight", cols * (dl + dvl)),
             ("scores", rows * cols),
             ("side inputs", rows * cols * max(0, params - 4))]
    total = max(DECODE_MIN_REGISTERS, sum(v for _, v in parts))
    return RegisterEstimate(total, tuple(parts))
