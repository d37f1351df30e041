"""The transposed tile's innermost side over an odd extent at least a tile
side long (`scheduling/transposed_plan.inner_side`): where the output's
innermost axis (33 of 32) is no multiple of the tile and the output axis
outside it steps on as one run, the side spans both when that takes fewer
tiles (`3 x 33` as one side of 99: 4 tiles, not 2 per row in 6). dm18's
permutation `[1, 2, 4, 3, 0]` (`A x B x C x D -> B x D x C x A`, A the
output's innermost, `C x A` its contiguous run) at small odd extents runs as
one kernel in numba's CUDA simulator and matches the reference interpreter
on fresh random inputs; the grid and the split of the side's coordinate are
read from the kernel."""

from __future__ import annotations

import pytest
from test_permutation_tile import scaled_transpose
from test_swapped_side_span import grid_of, tiled_kernel
from test_tile_wide_sides import _widths


def _run(shape: tuple[int, ...], perm: list[int], dtype: str) -> str:
    """The kernel text of `scaled_transpose(shape, perm)`, checked as one
    tiled kernel."""
    return tiled_kernel(scaled_transpose(shape, perm, dtype), dtype)


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
@pytest.mark.parametrize(("shape", "perm"), [
    ((33, 2, 3, 5), [1, 3, 2, 0]),
    pytest.param((37, 2, 3, 3, 5), [1, 2, 4, 3, 0], marks=pytest.mark.slow)])
def test_odd_innermost_extent_spans_the_axis_outside(shape: tuple[int, ...], perm: list[int],
                                                     dtype: str) -> None:
    """Innermost 33 (or 37) under 3 of the axis outside it: one side of 99
    (111) in 4 tiles along grid x; the rest of the batch (`B`, 2 or 6) on
    grid z, the swapped side (5) in one tile; each row of stores walks the
    run, split once per thread."""
    a = shape[0]
    source = _run(shape, perm, dtype)
    batch = shape[1] * (shape[2] if len(shape) == 5 else 1)
    assert grid_of(source) == (-(-3 * a // 32), 1, batch), source
    assert f"ci_h = ci // uint32({a})" in source, source


@pytest.mark.parametrize(("dtype", "lanes"), [("f32", 4), ("bf16", 4)])
def test_spanned_odd_run_with_wide_stores(dtype: str, lanes: int) -> None:
    """Output innermost 36 (a multiple of 4, none of 32) under 3: one side
    of 108 in 4 tiles, stored 4 elements per access (no word crosses into
    the next of the 3 rows: 4 divides 36)."""
    source = _run((36, 3, 5), [2, 1, 0], dtype)
    assert grid_of(source)[0] == 4, source
    assert "ci_h = ci // uint32(36)" in source, source
    assert _widths(source)[1] == lanes, source
