"""The tile chosen for the permutation (scheduling/transposed_plan.py,
codegen/pointwise_tile.py): every permutation of a 4-D tensor with odd and
prime extents and a short innermost axis (2, 3, 16), f32 and bf16, runs as
ONE kernel in numba's CUDA simulator and matches the reference interpreter
on fresh random inputs; where the output's innermost axis is shorter than
the tile side, the side also spans the output axis outside it, so a store
row covers a whole tile side of consecutive elements.
"""

from __future__ import annotations

import itertools

import codegen_harness as harness
import pytest
from sweep import sampled
from test_pointwise_transpose import TOLERANCE, permuted, t

from fusec.compiler.compile_pipeline import PipelineOptions, default_pipeline
from fusec.compiler.driver import make_registry
from tests.test_half_precision import check as check_half

PIPELINE = default_pipeline(make_registry([]), PipelineOptions())
"""The default pipeline: the transpose sinks past the scale, so the group
reads `x` through the tile."""

PERMS = [list(p) for p in itertools.permutations(range(4))]


def scaled_transpose(shape: tuple[int, ...], perm: list[int], dtype: str = "f32") -> str:
    """`relu(transpose(x * 0.5, perm)) + b`, b a row over the output's
    innermost axis (a broadcast input read directly beside the tile)."""
    out = permuted(shape, perm)
    tx, to, tb = t(shape, dtype), t(out, dtype), t((out[-1],), dtype)
    return (f"func.func @f(%x: {tx}, %b: {tb}) -> {to} {{\n"
            f"  %h = nn.constant dense<0.5> : {t((), dtype)}\n"
            f"  %m = nn.mul %x, %h : ({tx}, {t((), dtype)}) -> {tx}\n"
            f"  %t = nn.transpose %m {{perm = {perm}}} : ({tx}) -> {to}\n"
            f"  %r = nn.relu %t : {to}\n"
            f"  %s = nn.add %r, %b : ({to}, {tb}) -> {to}\n"
            f"  func.return %s : {to}\n}}\n")


def _inners(quick: int) -> list[object]:
    """The short innermost extents; all but `quick` are marked slow (the
    simulator runs each program a thread at a time)."""
    return [n if n == quick else pytest.param(n, marks=pytest.mark.slow) for n in (2, 3, 16)]


@pytest.mark.parametrize("inner", _inners(16))
@pytest.mark.parametrize("perm", sampled(PERMS, 3), ids=lambda p: "p" + "".join(map(str, p)))
def test_every_permutation_f32(perm: list[int], inner: int) -> None:
    """f32, extents 5, 3, 7 and a short innermost axis."""
    harness.check_program(scaled_transpose((5, 3, 7, inner), perm), 1, PIPELINE,
                          tolerance=TOLERANCE)


@pytest.mark.slow  # the f32 sweep covers every permutation in the default run
@pytest.mark.parametrize("inner", _inners(3))
@pytest.mark.parametrize("perm", PERMS, ids=lambda p: "p" + "".join(map(str, p)))
def test_every_permutation_bf16(perm: list[int], inner: int) -> None:
    """bf16 (staged as f32), the same extents."""
    check_half(scaled_transpose((3, 5, 7, inner), perm, "bf16"), "bf16", launches=1,
               pipeline=PIPELINE)


@pytest.mark.parametrize(("shape", "tiles"), [((5, 3, 16, 11), 3), ((5, 3, 3, 11), 1)])
def test_short_innermost_axis_side_spans_the_next_axis(shape: tuple[int, ...],
                                                       tiles: int) -> None:
    """perm [1, 3, 0, 2] (dm36's): the output's innermost axis (16, or 3)
    is shorter than the tile side, so the side spans it and the output
    axis outside it (5 x 16 = 80: 3 tiles; 5 x 3 = 15: 1), each row of
    outputs is consecutive in memory, and each row's coordinate splits in
    two for the loads of x, which index the two axes apart."""
    text = scaled_transpose(shape, [1, 3, 0, 2])
    program = harness.check_program(text, 1, PIPELINE, tolerance=TOLERANCE)
    source = program.kernels_source
    inner = shape[2]
    assert f"ci_h = ci // uint32({inner})" in source, source
    assert f"li_0_l = li_0 % uint32({inner})" in source, source
    assert f"grid ({tiles}, 1, 3)" in source, source

