"""The transposed tile of halves (`scheduling/pointwise.py`,
`scheduling/tile_vector.py`): a group that moves f16/bf16 gets a block of
`T * T / 8` threads, 8 elements each (16 bytes staged per thread, as 4 f32
elements with 256 threads), f32 keeps 256 threads; 8 lanes (16-byte words
of halves) fit a pass; and a swapped side that spans two groups which every
staged operand steps across as one axis is widened over both groups
together, though the inner one is odd. Every case runs as one kernel in
numba's CUDA simulator and matches the reference interpreter on fresh
random inputs; the block and the widths are read from the program."""

from __future__ import annotations

import codegen_harness as harness
import pytest
from test_permutation_tile import PERMS, PIPELINE, scaled_transpose
from test_pointwise_transpose import TOLERANCE, t
from test_tile_wide_sides import _widths

from fusec.analysis.program import Program
from tests.test_half_precision import check as check_half

QUICK = ([0, 3, 1, 2],)
"""Permutations the default run covers (the rest are slow)."""


def _perms() -> list[object]:
    return [p if p in QUICK else pytest.param(p, marks=pytest.mark.slow) for p in PERMS]


def _checked(text: str, dtype: str) -> Program:
    """`text` compiled as one kernel, run and compared with the reference."""
    if dtype == "f32":
        return harness.check_program(text, 1, PIPELINE, tolerance=TOLERANCE)
    return check_half(text, dtype, launches=1, pipeline=PIPELINE)


def _block(program: Program) -> tuple[int, int, int]:
    (launch,) = program.functions["f"].launches
    return launch.block


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
@pytest.mark.parametrize("perm", _perms(), ids=lambda p: "p" + "".join(map(str, p)))
def test_odd_extents_every_permutation(perm: list[int], dtype: str) -> None:
    """Odd and prime extents (3, 5, 7, 37): one kernel, the reference's
    numbers; a tiled kernel has 32 x 4 threads for halves, 32 x 8 for f32,
    and stays scalar (no side can align)."""
    program = _checked(scaled_transpose((3, 5, 7, 37), perm, dtype), dtype)
    source = program.kernels_source
    if "staged in shared memory" in source:
        assert _block(program) == ((32, 8, 1) if dtype == "f32" else (32, 4, 1)), source
        assert _widths(source) == (1, 1), source


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_halves_take_16_byte_words(dtype: str) -> None:
    """Input innermost 8, output innermost 16 (`3 x 16 x 8 -> 3 x 8 x 16`):
    both sides move 8 halves per access, which 256 threads (rows 64 apart
    in a 32-row tile) would not allow."""
    x, o = t((3, 16, 8), dtype), t((3, 8, 16), dtype)
    text = (f"func.func @f(%x: {x}) -> {o} {{\n"
            f"  %t = nn.transpose %x {{perm = [0, 2, 1]}} : ({x}) -> {o}\n"
            f"  %y = nn.neg %t : {o}\n"
            f"  func.return %y : {o}\n}}\n")
    program = _checked(text, dtype)
    source = program.kernels_source
    assert "staged in shared memory" in source, source
    assert _block(program) == (32, 4, 1), source
    assert _widths(source) == (8, 8), source


def _spanned_as_one(a: int, b: int, c: int, dtype: str) -> str:
    """dm06's pattern: `x + r` (r one value per `b`) transposed `[1, 2, 0]`
    to `b x c x a`, plus `s` (one value per `c`). `r` and `s` index the
    swapped side's `b` and `c` apart, `x` steps across them as one axis."""
    x, r, o, s = t((a, b, c), dtype), t((b, 1), dtype), t((b, c, a), dtype), t((c, 1), dtype)
    return (f"func.func @f(%x: {x}, %r: {r}, %s: {s}) -> {o} {{\n"
            f"  %p = nn.add %x, %r : ({x}, {r}) -> {x}\n"
            f"  %t = nn.transpose %p {{perm = [1, 2, 0]}} : ({x}) -> {o}\n"
            f"  %y = nn.add %t, %s : ({o}, {s}) -> {o}\n"
            f"  func.return %y : {o}\n}}\n")


@pytest.mark.parametrize(("shape", "dtype", "load"), [
    ((5, 4, 33), "bf16", 4), ((7, 8, 33), "f16", 8), ((5, 4, 37), "f32", 4),
    ((5, 3, 33), "bf16", 1)])
def test_swapped_side_spanned_as_one_axis(shape: tuple[int, int, int], dtype: str,
                                          load: int) -> None:
    """The swapped side spans `b x c` (33 or 37 no multiple of the tile)
    and the staged `x` steps across them as one axis: the loads are as wide
    as `b * c` and the row stride `b * c` allow (4 x 33 = 132: 4 lanes;
    8 x 33 = 264: 8), though `c` is odd; 3 x 33 = 99 stays scalar."""
    a, b, c = shape
    program = _checked(_spanned_as_one(a, b, c, dtype), dtype)
    source = program.kernels_source
    assert "staged in shared memory" in source, source
    assert f"la = min(m0 + lq * uint32({load}), uint32({b * c - load}))" in source or load == 1, \
        source
    assert _widths(source)[0] == load, source
