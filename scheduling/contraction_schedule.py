"""The contraction schedule: the tiles of fusec's SIMT GEMM
(`codegen/contraction.py` renders it, `codegen/gemm_tile_text.py` writes a
micro-tile's rows and columns), chosen for a target and recorded as
`#fusion.contraction<...>` (`dialects/schedule.py`)."""

from __future__ import annotations

from dataclasses import dataclass

from fusec.analysis.targets import Target
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import SCHEDULE_KEY, ContractionSchedule

SMEM_PAD = 4  # extra words per shared tile row: the transposing stores hit distinct banks


@dataclass(frozen=True)
class GemmTile:
    """Block tile `bm x bn`, K step `bk`, per-thread micro-tile `tm x tn`."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    vec: int = 1  # consecutive rows/columns per thread in each strip of its micro-tile

    def __post_init__(self) -> None:
        # The loaders give every thread whole rows of the A and B tiles.
        assert self.threads % self.bk == 0 and self.threads % self.bn == 0
        assert (self.bm * self.bk) % self.threads == 0 and (self.bk * self.bn) % self.threads == 0
        assert self.tm % self.vec == 0 and self.tn % self.vec == 0

    @property
    def threads_m(self) -> int:
        return self.bm // self.tm

    @property
    def threads_n(self) -> int:
        return self.bn // self.tn

    @property
    def threads(self) -> int:
        return self.threads_m * self.threads_n


# 128x128 tiles, 8x8 per thread (256 threads, 64 accumulators each): the
# large-matrix configuration (2 x 8 KiB of shared tiles, double buffered).
# Pairs of adjacent columns per thread (vec=2): a warp's 16 column threads
# read B fragments from 16 distinct banks, and ptxas keeps the kernel at
# ~120 registers (2 blocks per SM) where 16-apart columns need ~150.
LARGE_TILE = GemmTile(bm=128, bn=128, bk=8, tm=8, tn=8, vec=2)
# 64x64 tiles, 4x4 per thread (256 threads): products with a side of 64 to
# 127 (attention's P @ V with head size 64), which a 128 tile would half waste.
MEDIUM_TILE = GemmTile(bm=64, bn=64, bk=8, tm=4, tn=4, vec=2)
# 32x32 tiles, 4x4 per thread (64 threads): small products, where bigger
# tiles would leave most SMs idle.
SMALL_TILE = GemmTile(bm=32, bn=32, bk=8, tm=4, tn=4)


# Tiles tried when a contraction is over its register or shared-memory
# budget, largest first.
FALLBACK_TILES: tuple[GemmTile, ...] = (
    LARGE_TILE, MEDIUM_TILE, GemmTile(bm=64, bn=64, bk=8, tm=4, tn=4), SMALL_TILE,
    GemmTile(bm=32, bn=32, bk=8, tm=2, tn=2),
)

STAGES = 2  # shared-memory buffers of A and B: the next K tile loads during this one's FMAs


def tile_attr(tile: GemmTile, impl: str = "simt") -> ContractionSchedule:
    """`tile` as the group's `#fusion.contraction` schedule."""
    return ContractionSchedule.make(impl=impl, bm=tile.bm, bn=tile.bn, bk=tile.bk, tm=tile.tm,
                                    tn=tile.tn, vec=tile.vec, stages=STAGES)


def tile_of(attr: ContractionSchedule) -> GemmTile:
    """The tile a `#fusion.contraction` schedule records."""
    f = attr.int_field
    return GemmTile(bm=f("bm"), bn=f("bn"), bk=f("bk"), tm=f("tm"), tn=f("tn"), vec=f("vec"))


def recorded_tile(group: GroupOp) -> GemmTile | None:
    """The tile of `group`'s contraction schedule, if it has one."""
    attr = group.attributes.get(SCHEDULE_KEY)
    return tile_of(attr) if isinstance(attr, ContractionSchedule) else None


def choose_tile(batch: int, m: int, n: int, target: Target) -> GemmTile:
    """The biggest tile that fits inside the product and still gives every
    SM of `target` at least one block; the small tile otherwise."""
    for tile in (LARGE_TILE, MEDIUM_TILE):
        blocks = batch * -(-m // tile.bm) * -(-n // tile.bn)
        if m >= tile.bm and n >= tile.bn and blocks >= target.sms:
            return tile
    return SMALL_TILE



def gemm_shared_bytes(t: GemmTile, item: int = 4) -> int:
    """Static shared memory of a tile: double-buffered, padded A and B tiles."""
    return 2 * t.bk * (t.bm + t.bn + 2 * SMEM_PAD) * item
