"""The tile of a conv + pool group (`codegen/conv_pool.py` writes its
kernel): how many pooled outputs one block computes, and the conv outputs
its pool windows cover, which it stages in shared memory.

```python
shared_tile(pool)   # (16, 16) for a 2x2 pool of stride 2 over an 8x8 tile
```
"""

from __future__ import annotations

from fusec.dialects import nn

POOL_TILE = 8  # pooled outputs per block side: 64 outputs, a 16x16 conv tile for 2x2/2 pools

def shared_tile(pool: nn.MaxPool2dOp | nn.AvgPool2dOp,
                tile: tuple[int, int] = (POOL_TILE, POOL_TILE)) -> tuple[int, int]:
    """Rows and columns of conv outputs one block's pool windows cover, for
    a `tile` of pooled outputs."""
    (kh, kw), (sh, sw) = pool.kernel, pool.strides
    return (tile[0] - 1) * sh + kh, (tile[1] - 1) * sw + kw
