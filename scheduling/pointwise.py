"""The pointwise schedule: elements per thread and threads per block
(`codegen/pointwise.py` renders it), recorded as `#fusion.pointwise<...>`.

Element e of thread t is chunk element `e * block + t`, so every load of a
warp reads 128 consecutive bytes. Measured on H200 (2026-11-30, 2^28 f32,
32-op chain, flat views): 4 strided elements per thread and one chunk per
block 97% of copy bandwidth (8: 96%, 16: 96%); 4 consecutive elements per
thread ([n/4, 4] views) 91%; a grid-stride loop over the chunks with the
grid capped at 2112 blocks 83%.

A group reading a transposed operand whose contiguous axis is not the
output's innermost one gets `tile = TRANSPOSE_TILE`: one `tile x tile` block
of outputs per block, the operand staged through shared memory so that both
its load and the store are coalesced (`block / tile` rows of threads, each
thread `tile * tile / block` elements).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Operation

from fusec.analysis.targets import Target
from fusec.analysis.transposed_operands import tile_axes
from fusec.dialects.schedule import PointwiseSchedule

ELEMENTS_PER_THREAD = 4
"""Elements each thread loads (all before any arithmetic) per chunk."""
BLOCK_THREADS = 256
"""Threads per block: 8 warps hide memory latency and leave the register
file room for 8 blocks per SM."""


TRANSPOSE_TILE = 32
"""Side of the shared-memory tile of a transposed operand: one warp reads a
tile row (128 bytes of f32) along the operand's contiguous axis, and one
warp writes a row of outputs along theirs."""


def pointwise_schedule(target: Target, tile: int = 0) -> PointwiseSchedule:
    """The schedule of a pointwise group on `target` (a block no larger than
    the target launches); `tile` > 0: the transposed-operand tile."""
    block = min(BLOCK_THREADS, target.max_threads_per_block)
    if tile:
        return PointwiseSchedule.make(elements_per_thread=tile * tile // block, block=block,
                                      tile=tile)
    return PointwiseSchedule.make(elements_per_thread=ELEMENTS_PER_THREAD, block=block)


def transpose_tile(ops: Sequence[Operation], shape: Sequence[int]) -> int:
    """The tile side a pointwise group of `ops` over `shape` needs: 0 unless
    a transposed operand moves the innermost axis."""
    return TRANSPOSE_TILE if tile_axes(ops, shape) is not None else 0
