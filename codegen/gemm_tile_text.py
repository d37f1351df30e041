"""Where a thread's micro-tile rows and columns lie in a GEMM block tile
(`scheduling/contraction_schedule.py`'s `GemmTile`), as index text for the
contraction kernel (`codegen/contraction.py`).

```python
tile = GemmTile(bm=128, bn=128, bk=8, tm=8, tn=8, vec=2)
tile_row(tile, 3, "ty")   # "ty * 2 + 33": strip 1 of thread row ty, lane 1
```
"""

from __future__ import annotations

from fusec.codegen.kernel_source import int_literal
from fusec.scheduling.contraction_schedule import GemmTile


def tile_row(tile: GemmTile, i: int, thread: str) -> str:
    """Micro-tile row `i` of thread row `thread`, relative to the block tile:
    strips of `vec` consecutive rows, `threads_m * vec` rows apart."""
    strip, lane = divmod(i, tile.vec)
    return _affine(thread, tile.vec, strip * tile.threads_m * tile.vec + lane)


def tile_col(tile: GemmTile, j: int, thread: str) -> str:
    """Micro-tile column `j` of thread column `thread` (as `tile_row`)."""
    strip, lane = divmod(j, tile.vec)
    return _affine(thread, tile.vec, strip * tile.threads_n * tile.vec + lane)


def _affine(var: str, scale: int, offset: int) -> str:
    """`var * scale + offset`, without the trivial parts."""
    text = var if scale == 1 else f"{var} * {int_literal(scale)}"
    return f"{text} + {int_literal(offset)}" if offset else text
