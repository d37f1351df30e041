"""The index arithmetic of the tiled transposed-operand kernel
(codegen/pointwise_tile.py): merged axes, per-thread bases plus literal
offsets, a flat shared tile, clamps and guards only where tiles pass an
edge. Each program runs in numba's CUDA simulator against the reference
interpreter as ONE kernel; shapes are tiny.
"""

from __future__ import annotations

import re
import shutil

import pytest
from test_pointwise_transpose import check, t, tile_of, transposed_add

from fusec.analysis.strided_view import StridedView
from fusec.scheduling.transposed_plan import LinearAccess, axis_groups
from tests.test_half_precision import check as check_half

PIPELINE = "decompose,form-fusion-groups,tile-and-promote"


def test_axis_groups_merge_what_every_access_steps_across_alike() -> None:
    """NCHW -> NHWC of [32, 64, 56, 56] with a per-channel bias: H and W
    merge (the tile spans H*W = 3136 rows, not W = 56); N does not join them
    (the bias is broadcast along N and H, W alike, but x's N stride is not
    H*W times its W stride)."""
    shape = (32, 56, 56, 64)
    x = LinearAccess.of_view(
        StridedView.contiguous((32, 64, 56, 56)).transpose([0, 2, 3, 1]), shape)
    bias, out = LinearAccess.of_shape((64,), shape), LinearAccess.of_shape(shape, shape)
    assert axis_groups(shape, [x, bias, out]) == [(0,), (1, 2), (3,)]
    # A row of the output broadcast along H only keeps H and W apart.
    row = LinearAccess.of_shape((56, 1, 64), shape)
    assert axis_groups(shape, [x, row, out]) == [(0,), (1,), (2,), (3,)]
    # Size-1 axes drop out.
    assert axis_groups((1, 5, 1, 7), [LinearAccess.of_shape((1, 5, 1, 7), (1, 5, 1, 7))]) == [
        (1, 3)]


def test_merged_axes_whole_tiles_no_clamps_or_guards() -> None:
    """NCHW -> NHWC with H*W = 32 and C = 32: after merging H and W every
    tile is whole, so the kernel has no clamp and no guarded store; a
    block's batch coordinate is gridDim.z (no per-element division)."""
    x, b, o = t((2, 32, 4, 8)), t((32,)), t((2, 4, 8, 32))
    text = (f"func.func @f(%x: {x}, %b: {b}) -> {o} {{\n"
            f"  %t = nn.transpose %x {{perm = [0, 2, 3, 1]}} : ({x}) -> {o}\n"
            f"  %a = nn.add %t, %b : ({o}, {b}) -> {o}\n"
            f"  %y = nn.gelu %a : {o}\n"
            f"  func.return %y : {o}\n}}\n")
    assert tile_of(text) == 32
    source = check(text).kernels_source.split("def f_g0")[1]
    # the wide sides (`scheduling/tile_vector.py`) need no alignment test:
    # no branch at all
    assert "min(" not in source and "if " not in source
    assert "grid (1, 1, 2)" in check(text).kernels_source
    # the wide phases split the thread number by 8 (a shift), nothing else
    assert set(re.findall(r"(?://|%) uint32\((\d+)\)", source)) == {"8"}


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half_merged_tails_and_broadcast(dtype: str) -> None:
    """Halves, NCHW -> NHWC with H*W = 15 and C = 40 (tails on both tile
    axes) and a per-channel scale."""
    x, s, o = t((2, 40, 3, 5), dtype), t((40,), dtype), t((2, 3, 5, 40), dtype)
    text = (f"func.func @f(%x: {x}, %s: {s}) -> {o} {{\n"
            f"  %t = nn.transpose %x {{perm = [0, 2, 3, 1]}} : ({x}) -> {o}\n"
            f"  %a = nn.mul %t, %s : ({o}, {s}) -> {o}\n"
            f"  %y = nn.sigmoid %a : {o}\n"
            f"  func.return %y : {o}\n}}\n")
    assert tile_of(text) == 32
    program = check_half(text, dtype, launches=1, pipeline=PIPELINE)
    assert "min(m0 + tx, uint32(14))" in program.kernels_source  # H*W merged: 15 rows


def test_two_transposed_operands_slice_and_column() -> None:
    """Two staged operands (f32, tails), a slice of a third input read at an
    offset, and a column broadcast along the innermost axis."""
    a, o = t((37, 35)), t((35, 37))
    wide, col = t((35, 40)), t((35, 1))
    text = (f"func.func @f(%a: {a}, %b: {a}, %w: {wide}, %c: {col}) -> {o} {{\n"
            f"  %ta = nn.transpose %a {{perm = [1, 0]}} : ({a}) -> {o}\n"
            f"  %tb = nn.transpose %b {{perm = [1, 0]}} : ({a}) -> {o}\n"
            f"  %s = nn.slice %w {{starts = [0, 3], limits = [35, 40], strides = [1, 1]}}"
            f" : ({wide}) -> {o}\n"
            f"  %m = nn.mul %ta, %tb : ({o}, {o}) -> {o}\n"
            f"  %d = nn.sub %m, %s : ({o}, {o}) -> {o}\n"
            f"  %e = nn.mul %d, %c : ({o}, {col}) -> {o}\n"
            f"  func.return %e : {o}\n}}\n")
    assert tile_of(text) == 32
    source = check(text).kernels_source
    assert "tile1 = cuda.shared.array(1056, float32)" in source
    assert "bb_l0 = uint32(3)" in source  # the slice's offset, once per block


def test_smaller_result_stored_once() -> None:
    """A result broadcast along the batch and the swapped axis (a group
    with two results) is stored by the points at coordinate 0 of both."""
    x, o, b = t((3, 37, 33)), t((3, 33, 37)), t((37,))
    text = (f"func.func @f(%x: {x}, %b: {b}) -> ({o}, {b}) {{\n"
            f"  %r:2 = fusion.group (%x, %b) {{name = \"g0\", kind = \"pointwise\"}}"
            f" : ({x}, {b}) -> ({o}, {b}) {{\n"
            f"  ^bb0(%xa: {x}, %ba: {b}):\n"
            f"    %eb = nn.exp %ba : {b}\n"
            f"    %t = nn.transpose %xa {{perm = [0, 2, 1]}} : ({x}) -> {o}\n"
            f"    %m = nn.mul %t, %eb : ({o}, {b}) -> {o}\n"
            f"    fusion.yield %m, %eb : {o}, {b}\n"
            f"  }}\n"
            f"  func.return %r#0, %r#1 : {o}, {b}\n}}\n")
    assert tile_of(text) == 32
    source = check(text).kernels_source
    assert "ci_raw < uint32(37) and b0 == uint32(0) and ca == uint32(0):" in source
    assert source.count("out1[") == 1  # rows past the first never own an element


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")
@pytest.mark.slow
def test_ptx_offsets_fold_into_addresses() -> None:
    """On sm_90 the tiled kernel's rows are immediate offsets of one base:
    no wrap-around test, no 64-bit multiply per element. The kernel holds
    its wide path alone (`codegen/pointwise_tile.py`: arrays are aligned);
    each of its two phases may compute its shared-tile base with one
    multiply, per thread, never per element."""
    import codegen_harness as harness

    from fusec.codegen.ptx import compile_program_ptx

    info = compile_program_ptx(harness.compile_text(transposed_add((64, 64), [1, 0]), PIPELINE))
    (kernel,) = [k for name, k in info.items() if "transpose" in name]
    ptx = str(kernel["ptx"])
    assert ptx.count("mul.lo.s64") <= 4 and "selp.b64" not in ptx and "shr.s64" not in ptx
    assert len(re.findall(r"ld\.global\.f32\s+%f\d+, \[%rd\d+\+\d+\]", ptx)) >= 3
    # lanes 1-3 of the wide path's words
    assert len(re.findall(r"st\.shared\.f32\s+\[%rd\d+\+\d+\]", ptx)) == 3
