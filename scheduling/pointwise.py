"""The pointwise schedule: elements per thread and threads per block
(`codegen/pointwise.py` renders it), recorded as `#fusion.pointwise<...>`.

Element e of thread t is chunk element `e * block + t`, so every load of a
warp reads 128 consecutive bytes. Measured on H200 (2026-11-30, 2^28 f32,
32-op chain, flat views): 4 strided elements per thread and one chunk per
block 97% of copy bandwidth (8: 96%, 16: 96%); 4 consecutive elements per
thread ([n/4, 4] views) 91%; a grid-stride loop over the chunks with the
grid capped at 2112 blocks 83%.
"""

from __future__ import annotations

from fusec.analysis.targets import Target
from fusec.dialects.schedule import PointwiseSchedule

ELEMENTS_PER_THREAD = 4
"""Elements each thread loads (all before any arithmetic) per chunk."""
BLOCK_THREADS = 256
"""Threads per block: 8 warps hide memory latency and leave the register
file room for 8 blocks per SM."""


def pointwise_schedule(target: Target) -> PointwiseSchedule:
    """The schedule of a pointwise group on `target` (a block no larger than
    the target launches)."""
    return PointwiseSchedule.make(elements_per_thread=ELEMENTS_PER_THREAD,
                                  block=min(BLOCK_THREADS, target.max_threads_per_block))
