"""How wide the staging loads of a depthwise or pool halo tile are
(`codegen/window_wide_staging.py`, `codegen/window_flat_staging.py`).

A block of the `depthwise` path (a depthwise conv or a pool) stages
`rows x cols` input elements of one channel (`TiledWindow.halo`). Element
by element, a warp of bf16 loads moves
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

A tile as wide as the output (one tile across: the block's first column is
the padding's, a constant) spans whole rows of the image, so its part inside
the image is one contiguous run of memory, `rows x W` elements from the
tile's first row (`codegen/window_flat_staging.py`). That run is staged in
the widest words (16 bytes: 4 f32, 8 halves; no row ends to drop elements
at) spread flat over the threads, and the padding columns are stored
without loads (`flat_lanes`). The narrow images of depthwise convs and pools
(8 to 64 columns) take this path: staged row by row, a row of 8 bf16 took 4
words of 4 for its 8 elements.
"""

from __future__ import annotations

from fusec.dialects.element_types import of_device_dtype
from fusec.scheduling.flat_vector import lane_choices
from fusec.scheduling.window_plan import UNROLL_BUDGET, TiledWindow, tile_passes

FLAT_MIN_WORDS = 2  # words a flat run spans at least (per block) to be staged in words

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


def flat_words(tiled: TiledWindow, lanes: int) -> int:
    """Words of `lanes` that cover a block's flat run of `rows x W` input
    elements: exactly when rows are whole words (the run then starts a
    word), else at most, starting anywhere in a word."""
    rows, _ = tiled.halo
    if tiled.geo.w % lanes == 0:
        return rows * tiled.geo.w // lanes
    return words_per_row(rows * tiled.geo.w, lanes)


def pad_columns(tiled: TiledWindow) -> tuple[int, int]:
    """Columns of a one-across tile left and right of the image (padding,
    stored without loads)."""
    g = tiled.geo
    _, cols = tiled.halo
    left = min(g.pads[1], cols)
    return left, max(0, cols - left - g.w)


def flat_passes(tiled: TiledWindow, lanes: int) -> tuple[int, int]:
    """Words and padding elements a thread stages on the flat path."""
    rows, _ = tiled.halo
    left, right = pad_columns(tiled)
    words = tile_passes(1, flat_words(tiled, lanes), tiled.threads)
    pads = tile_passes(rows, left + right, tiled.threads) if left + right else 0
    return words, pads


def flat_lanes(tiled: TiledWindow, dtype: str) -> int:
    """Elements per word of the flat staging of `tiled`'s halo tile (see
    the module docstring), or 1 when it does not take that path: not a
    depthwise or pool tile, more than one tile across, a run of fewer than
    `FLAT_MIN_WORDS` words, or more than `UNROLL_BUDGET` elements per
    thread."""
    choices = lane_choices(dtype)
    if tiled.mode != "depthwise" or tiled.spatial_tiles[1] != 1 or not choices:
        return 1
    lanes = choices[0]
    rows, _ = tiled.halo
    words, pads = flat_passes(tiled, lanes)
    if rows * tiled.geo.w < FLAT_MIN_WORDS * lanes or words * lanes + pads > UNROLL_BUDGET:
        return 1
    return lanes


def staged_registers(tiled: TiledWindow, dtype: str) -> int | None:
    """32-bit registers the worded staging of `tiled` holds in flight (its
    words, `WIDE_BATCH` at a time), or None when the tile is staged element
    by element (`TiledWindow.staged_in_flight` counts it)."""
    lanes = flat_lanes(tiled, dtype)
    if lanes > 1:
        words, _ = flat_passes(tiled, lanes)
    else:
        lanes = stage_lanes(tiled, dtype)
        if lanes == 1:
            return None
        rows, cols = tiled.halo
        words = tile_passes(rows, words_per_row(cols, lanes), tiled.threads)
    return min(words, WIDE_BATCH) * -(-lanes * of_device_dtype(dtype).width // 4)


def stage_lanes(tiled: TiledWindow, dtype: str) -> int:
    """Elements per staging load of `tiled`'s halo tile, whose input has
    device dtype `dtype` (1: element by element; see the module docstring)."""
    if tiled.mode != "depthwise" or tiled.looped_staging:
        return 1
    rows, cols = tiled.halo
    for lanes in (n for n in lane_choices(dtype) if n <= MAX_STAGE_LANES):
        words = tile_passes(rows, words_per_row(cols, lanes), tiled.threads)
        if cols >= 2 * lanes and words * lanes <= UNROLL_BUDGET:
            return lanes
    return 1


def out_lanes(tiled: TiledWindow, dtype: str) -> int:
    """Elements per word of the stores of a one-across depthwise or pool
    block's outputs of device dtype `dtype`, or 1 (stored one by one, down
    a column per thread). A one-across block's `th x ow` outputs are one
    contiguous run of the output; passed through its halo tile in shared
    memory (`th x tw` fits in it), they are stored in the widest words (16
    bytes), consecutive threads on consecutive words, the words at the
    run's ends element by element (`codegen/window_out_words.py`). A run
    shorter than `FLAT_MIN_WORDS` words keeps the scalar stores."""
    choices = lane_choices(dtype)
    if tiled.mode != "depthwise" or tiled.spatial_tiles[1] != 1 or not choices:
        return 1
    if tiled.plan.th * tiled.geo.ow < FLAT_MIN_WORDS * choices[0]:
        return 1
    return choices[0]
