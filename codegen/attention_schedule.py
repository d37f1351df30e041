"""The schedule of a fused attention kernel (`codegen/attention.py`): its
tile, the shared memory and registers that tile needs, and how
`fuse-attention` picks one for a target.

A block owns `block_q` query rows of one (batch, head); its threads form
`block_q / rows` row groups of `lanes` consecutive threads. A thread holds
`rows` query rows (`ty + i * row_groups`), and of each K/V tile of `block_k`
keys the keys `tx + j * lanes` (scores) and head dims `tx + j * lanes`
(output accumulators). The tile is recorded on the group as four integer
attributes, read back verbatim by the emitter:

```mlir
%o = fusion.group (...) {name = "attn0", kind = "attention", attn_block_q = 64,
                         attn_block_k = 32, attn_rows = 4, attn_lanes = 8} ...
```
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import IntegerAttr, IntegerType
from xdsl.ir import Operation

from fusec.analysis.targets import Target
from fusec.codegen.register_model import PARAM_REGISTERS, RegisterEstimate

WARP = 32
ITEM = 4  # bytes of an f32: attention is fused in f32 only
STATIC_SHARED_LIMIT = 48 * 1024  # what a numba kernel may declare statically
TILE_ATTRS = ("attn_block_q", "attn_block_k", "attn_rows", "attn_lanes")

# Register model (codegen/register_model.py style), fitted to ptxas sm_90 on
# the generated kernels (tests/test_attention.py checks it within 25%).
ATTN_BASE = 20  # indices, tile origins, view offsets, loop counters, row state
ATTN_PER_VALUE = 2  # per accumulator and score: the value and its rescaled or exp'd copy


@dataclass(frozen=True)
class AttentionTile:
    """`block_q` queries per block, `block_k` keys per K/V tile, `rows` query
    rows per thread, `lanes` threads per row group (a power of two <= 32)."""

    block_q: int
    block_k: int
    rows: int
    lanes: int

    @property
    def row_groups(self) -> int:
        return self.block_q // self.rows

    @property
    def threads(self) -> int:
        return self.row_groups * self.lanes

    def keys(self) -> int:
        """Scores per row a thread holds."""
        return -(-self.block_k // self.lanes)

    def dims(self, dv: int) -> int:
        """Output head dims a thread accumulates."""
        return -(-dv // self.lanes)

    def p_pad(self) -> int:
        """Padding of the probability tile's rows so that a warp's stores
        (`lanes` keys x `32 / lanes` rows) hit 32 distinct banks."""
        return (WARP // self.lanes - self.block_q) % WARP

    def text(self) -> str:
        return (f"{self.block_q} queries x {self.block_k} keys per block, {self.rows} rows "
                f"x {self.lanes} lanes per row group ({self.threads} threads)")


# Tried in order; the cost model below chooses among those that fit.
CANDIDATES = (
    AttentionTile(64, 32, 4, 8),
    AttentionTile(32, 32, 4, 8),
    AttentionTile(32, 32, 2, 8),
    AttentionTile(16, 16, 2, 8),
)


def shared_bytes(tile: AttentionTile, d: int, dv: int) -> int:
    """Q tile, K tile (rows padded by one word), V tile, transposed
    probability tile, and the simulator's row exchange."""
    words = tile.block_q * (d + 1) + tile.block_k * (d + 1) + tile.block_k * dv
    words += tile.block_k * (tile.block_q + tile.p_pad())
    words += tile.block_q * tile.lanes  # row exchange (simulator only; GPU uses shuffles)
    return words * ITEM


def attention_registers(tile: AttentionTile, dv: int, params: int) -> RegisterEstimate:
    """Registers per thread: output accumulators and scores (each with the
    temporary of its rescale or exp), addressing, the rest."""
    acc = tile.rows * tile.dims(dv)
    scores = tile.rows * tile.keys()
    parts = (("base", ATTN_BASE), ("addressing", PARAM_REGISTERS * params),
             ("accumulators", ATTN_PER_VALUE * acc), ("scores", ATTN_PER_VALUE * scores))
    return RegisterEstimate(sum(v for _, v in parts), parts)


def tile_cost(tile: AttentionTile, target: Target, heads: int, s: int, skv: int,
              d: int, dv: int) -> float:
    """Clocks of the busiest SM: its share of the blocks times one block's
    shared-memory reads or FMAs, whichever bounds (the SIMT kernel is
    shared-memory bound when a thread holds few rows)."""
    blocks = heads * -(-s // tile.block_q)
    per_sm = -(-blocks // target.sms)
    keys, dims = tile.keys(), tile.dims(dv)
    loads = d * (tile.rows + keys) + tile.block_k * (tile.rows + dims)
    fmas = d * tile.rows * keys + tile.block_k * tile.rows * dims
    threads = tile.threads
    step = max(threads * loads / target.shared_lanes_per_sm,
               threads * fmas / target.fma_lanes_per_sm)
    return per_sm * -(-skv // tile.block_k) * step


def choose_tile(target: Target, heads: int, s: int, skv: int, d: int, dv: int,
                params: int) -> AttentionTile | str:
    """The cheapest candidate within the shared-memory limit and the
    register budget, or the reason none fits."""
    limit = min(target.shared_memory_per_block, STATIC_SHARED_LIMIT)
    fits = [t for t in CANDIDATES if shared_bytes(t, d, dv) <= limit
            and attention_registers(t, dv, params).registers <= target.register_budget]
    if not fits:
        small = CANDIDATES[-1]
        need = shared_bytes(small, d, dv)
        regs = attention_registers(small, dv, params).registers
        return (f"head dim {d} (values {dv}) is too large: the smallest tile needs {need} "
                f"bytes of shared memory (limit {limit}) and ~{regs} registers per thread "
                f"(budget {target.register_budget})")
    return min(fits, key=lambda t: (tile_cost(t, target, heads, s, skv, d, dv), -t.block_q))


def tile_attributes(tile: AttentionTile) -> dict[str, IntegerAttr[IntegerType]]:
    """The group attributes recording `tile`."""
    values = (tile.block_q, tile.block_k, tile.rows, tile.lanes)
    return {k: IntegerAttr(v, IntegerType(64)) for k, v in zip(TILE_ATTRS, values, strict=True)}


def recorded_tile(group: Operation) -> AttentionTile | None:
    """The tile recorded on `group`, if all four attributes are there."""
    values: list[int] = []
    for key in TILE_ATTRS:
        attr = group.attributes.get(key)
        if not isinstance(attr, IntegerAttr):
            return None
        values.append(int(attr.value.data))
    return AttentionTile(*values)
