"""How wide the staging loads of a depthwise or pool halo tile are
(`codegen/window_wide_staging.py`).

A block of the `depthwise` path (a depthwise conv) stages `rows x cols` input elements of one
channel (`TiledWindow.halo`). Element by element, a warp of bf16 loads moves
64 bytes per instruction and a thread holds `STAGE_BATCH` elements in
flight. Staged as words of `lanes` consecutive elements of the input's
memory (16 bytes of f32, 8 of bf16 or f16: `scheduling/flat_vector.py`),
aligned to the word, a thread holds `WIDE_BATCH` words in flight and a
warp's words are consecutive. A staged row starts anywhere in a word (the
padding, a row width that is not a multiple of the word), so a row takes
`(cols - 1) // lanes + 2` words at most; the elements of a word outside the
row are dropped.

The words are used when a row spans at least two of them and a thread
stages at most `UNROLL_BUDGET` elements (their code unrolled); otherwise the
tile is staged element by element.
"""

from __future__ import annotations

from fusec.scheduling.flat_vector import lane_choices
from fusec.scheduling.window_plan import UNROLL_BUDGET, TiledWindow, tile_passes

WIDE_BATCH = 4  # words a thread loads before storing their elements
MAX_STAGE_LANES = 4
"""The widest staging word in elements: 16 bytes of f32, 8 of halves. A
staged row starts anywhere in a word, so wider words (16 bytes of halves)
drop more elements at the row ends of the narrow halo tiles these kernels
stage, and `WIDE_BATCH` such words already keep 32-64 bytes per thread in
flight."""


def words_per_row(cols: int, lanes: int) -> int:
    """Words that cover `cols` consecutive elements starting anywhere in a
    word of `lanes`."""
    return (cols - 1) // lanes + 2


def stage_lanes(tiled: TiledWindow, dtype: str) -> int:
    """Elements per staging load of `tiled`'s halo tile, whose input has
    device dtype `dtype` (1: element by element; see the module docstring)."""
    # pools stay element by element: their kernels ran at the copy floor
    # already, and ptxas gives the worded ones 20-30% fewer registers than
    # the register model fitted on them (`register_model.window_estimate`)
    if tiled.mode != "depthwise" or tiled.geo.kind != "conv" or tiled.looped_staging:
        return 1
    rows, cols = tiled.halo
    for lanes in (n for n in lane_choices(dtype) if n <= MAX_STAGE_LANES):
        words = tile_passes(rows, words_per_row(cols, lanes), tiled.threads)
        if cols >= 2 * lanes and words * lanes <= UNROLL_BUDGET:
            return lanes
    return 1
