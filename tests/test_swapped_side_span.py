"""The transposed tile's swapped side over an odd extent
(`scheduling/transposed_plan.swapped_side`, `codegen/pointwise_tile.py`):
where the input's innermost axis, the side the staging loads walk, is at
least a tile side long but no multiple of it (37 of 32), the side also spans
the output axis outside it, so the tiles along it are nearly full. perm
[1, 3, 0, 2] (dm36's) of `x` of `P x Q x R x S` makes the output
`Q x S x P x R`: the swapped side is `Q x S`, the innermost side `P x R`.
Each case runs as one kernel in numba's CUDA simulator and matches the
reference interpreter on fresh random inputs; the grid and the split of the
side's coordinate are read from the kernel."""

from __future__ import annotations

import re

import codegen_harness as harness
import pytest
from test_permutation_tile import PIPELINE, scaled_transpose
from test_pointwise_transpose import TOLERANCE, permuted, t
from test_tile_wide_sides import _widths

from fusec.analysis.program import Program
from tests.test_half_precision import check as check_half

PERM = [1, 3, 0, 2]


def _scaled_by_rows(shape: tuple[int, ...], dtype: str) -> str:
    """`scaled_transpose(shape, PERM)` times `c`, one value per row of the
    output's outermost axis (`Q x 1 x 1 x 1`): an input read directly that
    steps across the spanned side's two axes apart."""
    out = permuted(shape, PERM)
    to, tc = t(out, dtype), t((out[0], 1, 1, 1), dtype)
    head, _, rest = scaled_transpose(shape, PERM, dtype).partition(") -> ")
    body, _, _ = rest.partition("  func.return")
    return (f"{head}, %c: {tc}) -> {body}"
            f"  %y = nn.mul %s, %c : ({to}, {tc}) -> {to}\n"
            f"  func.return %y : {to}\n}}\n")


def tiled_kernel(text: str, dtype: str) -> str:
    """The kernel text of `text`, checked against the reference as one
    kernel staged in shared memory."""
    program: Program = (harness.check_program(text, 1, PIPELINE, tolerance=TOLERANCE)
                        if dtype == "f32" else check_half(text, dtype, launches=1,
                                                          pipeline=PIPELINE))
    source = program.kernels_source
    assert "staged in shared memory" in source, source
    return source


def _run(shape: tuple[int, ...], dtype: str, rows: bool = False) -> str:
    """The kernel text of `scaled_transpose(shape, PERM)` (with `rows`,
    `_scaled_by_rows`), checked."""
    text = _scaled_by_rows(shape, dtype) if rows else scaled_transpose(shape, PERM, dtype)
    return tiled_kernel(text, dtype)


def grid_of(source: str) -> tuple[int, int, int]:
    found = re.search(r"grid \((\d+), (\d+), (\d+)\)", source)
    assert found is not None, source
    return int(found[1]), int(found[2]), int(found[3])


@pytest.mark.parametrize(("shape", "dtype"), [
    ((2, 3, 3, 37), "f32"), ((2, 3, 3, 41), "bf16"), ((2, 3, 3, 33), "f32")])
def test_odd_swapped_extent_spans_the_axis_outside(shape: tuple[int, ...], dtype: str) -> None:
    """Swapped extents 37, 41 (prime) and 33 (odd) under 3 rows of the
    output axis outside: one side of 111, 123 or 99 in 4 tiles, not 2 per
    row in 6, no batch left on gridDim.z. The staging loads split the
    side's coordinate once per thread; the stores step across it as one
    axis (no split), the per-row scale `c` splits each row's."""
    q, s = shape[1], shape[3]
    source = _run(shape, dtype)
    assert grid_of(source) == (1, -(-q * s // 32), 1), source
    assert f"la_h = la // uint32({s})" in source, source
    assert "ca_0_l" not in source, source
    source = _run(shape, dtype, rows=True)
    assert grid_of(source) == (1, -(-q * s // 32), 1), source
    assert f"ca_0_l = ca_0 % uint32({s})" in source, source


@pytest.mark.parametrize(("shape", "dtype", "widths"), [
    ((2, 3, 8, 37), "f32", (1, 4)), ((2, 3, 4, 37), "bf16", (1, 4)),
    ((2, 3, 3, 36), "f32", (4, 1))])
def test_spanned_side_beside_wide_accesses(shape: tuple[int, ...], dtype: str,
                                           widths: tuple[int, int]) -> None:
    """The wide accesses of `scheduling/tile_vector.py` still apply: stores
    of 4 along the other side (the output's innermost 8 or 4) beside the
    spanned odd side, and loads of 4 along a spanned side of 3 x 36 (no
    word crosses a row of 36)."""
    source = _run(shape, dtype)
    assert _widths(source) == widths, source
    assert grid_of(source)[1:] == (-(-shape[1] * shape[3] // 32), 1), source


@pytest.mark.parametrize(("shape", "grid"), [((2, 2, 3, 63), (1, 2, 2)),
                                             ((2, 3, 3, 64), (1, 2, 3))])
def test_side_kept_where_spanning_saves_no_tile(shape: tuple[int, ...],
                                                grid: tuple[int, int, int]) -> None:
    """2 x 63 takes 4 tiles either way, 64 fills its 2: the side stays the
    swapped axis alone, the outer axis on gridDim.z."""
    source = _run(shape, "f32")
    assert grid_of(source) == grid, source
    assert "la_h" not in source, source
