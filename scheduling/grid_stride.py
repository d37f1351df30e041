"""The launch of a 1-D grid-stride kernel (the direct window kernel): how many
blocks of how many threads, for a target.

```python
grid_stride_launch(1 << 24, H100)   # ((4224, 1, 1), (256, 1, 1)): 32 blocks per SM of 132
```
"""

from __future__ import annotations

from fusec.analysis.targets import Target

# Threads per block of the grid-stride kernels: 8 warps per block hide memory
# latency and leave the register file room for 8 blocks per SM.
THREADS_PER_BLOCK = 256
# Grid-stride kernels launch at most BLOCKS_PER_SM blocks per SM of the
# target: enough to fill its SMs many times over, few enough that each thread
# loops over several elements and the block scheduler does not become the
# bottleneck.
BLOCKS_PER_SM = 32


def grid_stride_launch(
    work_items: int, target: Target, threads: int = THREADS_PER_BLOCK
) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(grid, block) of a 1-D grid-stride loop over `work_items` items: one
    item per thread up to `BLOCKS_PER_SM` blocks per SM of `target`, never an
    empty grid."""
    blocks = max(1, min(-(-work_items // threads), target.sms * BLOCKS_PER_SM))
    return (blocks, 1, 1), (threads, 1, 1)
