"""Wide sides of the transposed tile (`scheduling/tile_vector.py`,
`codegen/pointwise_tile.py`): the staging loads move several consecutive
elements of the input's innermost axis per access and the stores several of
the output's, where the extents and the views allow, with the scalar tile
as the fallback for an unaligned array. Every permutation of a 4-D tensor
with prime extents and an innermost extent that allows each width, f32, bf16
and f16, runs as one kernel in the simulator and matches the reference on
fresh random inputs; the widths are read from the kernels."""

from __future__ import annotations

import re
from pathlib import Path

import codegen_harness as harness
import numpy as np
import pytest
from test_permutation_tile import PERMS, PIPELINE, scaled_transpose
from test_pointwise_transpose import TOLERANCE, permuted, t

from fusec.compiler.cli import main
from tests.codegen_harness import run_one_element_in
from tests.test_half_precision import check as check_half

QUICK = ([0, 3, 1, 2], [2, 3, 0, 1], [3, 2, 1, 0])
"""Permutations the default run covers in every type (the rest are slow)."""


def _perms(quick: tuple[list[int], ...]) -> list[object]:
    return [p if p in quick else pytest.param(p, marks=pytest.mark.slow) for p in PERMS]


def _widths(source: str) -> tuple[int, int]:
    """The lanes of the staging loads and of the stores, from the words the
    kernel moves (1: one element per access)."""
    words = {"ld_vec4_u32(in": 8, "ld_vec4_f32(in": 4, "ld_wide64(in": 4, "ld_wide32(in": 2}
    stores = {"st_vec4_u32(out": 8, "st_vec4_f32(out": 4, "st_wide64(out": 4,
              "st_wide32(out": 2}
    load = next((n for w, n in words.items() if w in source), 1)
    store = next((n for w, n in stores.items() if w in source), 1)
    return load, store


def _expected(shape: tuple[int, ...], perm: list[int], lanes: int) -> tuple[int, int]:
    """What the plan should choose for the tile of `scaled_transpose(shape,
    perm)`: each side is wide where `lanes` divides its extent (the
    output's side may merge more axes: wide too)."""
    load = lanes if shape[-1] % lanes == 0 else 1
    store = lanes if shape[perm[-1]] % lanes == 0 else 1
    return load, store


@pytest.mark.parametrize("perm", _perms(QUICK), ids=lambda p: "p" + "".join(map(str, p)))
def test_every_permutation_f32(perm: list[int]) -> None:
    """f32, extents 3, 5, 4 and 8: 16-byte words where a side's extent is
    a multiple of 4, one kernel, the reference's numbers."""
    shape = (3, 5, 4, 8)
    program = harness.check_program(scaled_transpose(shape, perm), 1, PIPELINE,
                                    tolerance=TOLERANCE)
    source = program.kernels_source
    if "staged in shared memory" in source:  # some permutations read whole sectors flat
        load, store = _widths(source)
        want = _expected(shape, perm, 4)
        assert load == want[0] and (store == want[1] or store == 4), source


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("perm", _perms(QUICK[:2]), ids=lambda p: "p" + "".join(map(str, p)))
def test_every_permutation_halves(perm: list[int], dtype: str) -> None:
    """Halves, extents 3, 5, 2 and 4: 8-byte words along a side of 4,
    4-byte words (2 halves) along a side of 2, 16-byte words (8 halves)
    where the side merges axes into 8 (the halves' tile has 128 threads,
    rows 8 lanes apart fit it)."""
    shape = (3, 5, 2, 4)
    program = check_half(scaled_transpose(shape, perm, dtype), dtype, launches=1,
                         pipeline=PIPELINE)
    source = program.kernels_source
    if "staged in shared memory" in source:
        load, store = _widths(source)
        assert load in (4, 8), source
        out_inner = shape[perm[-1]]
        assert store in (out_inner if out_inner in (2, 4) else 1, 4, 8), source


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_odd_extents_stay_scalar(dtype: str) -> None:
    """Prime extents on both sides (7 and 5): one element per access, no
    alignment test."""
    text = scaled_transpose((3, 5, 2, 7), [0, 3, 2, 1], dtype)
    if dtype == "f32":
        program = harness.check_program(text, 1, PIPELINE, tolerance=TOLERANCE)
    else:
        program = check_half(text, dtype, launches=1, pipeline=PIPELINE)
    assert "is_aligned(" not in program.kernels_source.split("@cuda.jit")[-1]
    assert _widths(program.kernels_source) == (1, 1)


def test_odd_load_side_wide_store_side() -> None:
    """perm [1, 3, 0, 2] (dm36's) with an odd input innermost axis (7): the
    staging loads stay scalar, the stores, along `5 x 8` consecutive
    outputs, move 16 bytes."""
    program = harness.check_program(scaled_transpose((5, 3, 8, 7), [1, 3, 0, 2]), 1, PIPELINE,
                                    tolerance=TOLERANCE)
    assert _widths(program.kernels_source) == (1, 4), program.kernels_source


def test_a_slice_at_an_odd_offset_loads_scalar() -> None:
    """The staged operand is a crop of `x` starting one element into its
    innermost axis: its words would be misaligned, so the loads stay
    scalar; the stores are still wide."""
    x, c, o = t((4, 6, 9)), t((4, 6, 8)), t((4, 8, 6))
    text = (f"func.func @f(%x: {x}) -> {o} {{\n"
            f"  %s = nn.slice %x {{starts = [0, 0, 1], limits = [4, 6, 9]}} : ({x}) -> {c}\n"
            f"  %t = nn.transpose %s {{perm = [0, 2, 1]}} : ({c}) -> {o}\n"
            f"  %y = nn.neg %t : {o}\n"
            f"  func.return %y : {o}\n}}\n")
    program = harness.check_program(text, 1, PIPELINE, tolerance=TOLERANCE)
    source = program.kernels_source
    assert "staged in shared memory" in source
    load, _ = _widths(source)
    assert load == 1 and "is_aligned(in0" not in source, source


@pytest.mark.parametrize(("dtype", "host", "words"), [
    ("f32", np.float32, ("ld_vec4_f32(in0", "st_vec4_f32(out0")),
    ("f16", np.float16, ("ld_wide64(in0", "st_vec4_u32(out0"))])
def test_an_unaligned_input_is_copied_for_the_wide_tile(
        dtype: str, host: type, words: tuple[str, ...], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], no_ptxas_probe: None) -> None:
    """An input one element into its buffer (2 or 4 bytes off) is copied by
    the runtime before the kernel, which stages the tile in words with no
    alignment test and no scalar twin; the result is the aligned one's (the
    simulator's 16-byte helper fails on a misaligned address, as the GPU
    does)."""
    shape, perm = (3, 8, 12), [0, 2, 1]
    x_t, o_t = t(shape, dtype), t(permuted(shape, perm), dtype)
    text = (f"func.func @f(%x: {x_t}) -> {o_t} {{\n"
            f"  %t = nn.transpose %x {{perm = {perm}}} : ({x_t}) -> {o_t}\n"
            f"  %y = nn.neg %t : {o_t}\n"
            f"  func.return %y : {o_t}\n}}\n")
    prog, out = tmp_path / "p.mlir", tmp_path / "out"
    prog.write_text(text)
    assert main([str(prog), "-o", str(out)]) == 0, capsys.readouterr().err
    source = (out / "kernels.py").read_text()
    assert "staged in shared memory" in source and all(w in source for w in words), source
    assert "is_aligned(" not in source.split("@cuda.jit")[-1]
    x = (np.random.default_rng(5).standard_normal(shape) + 2.0).astype(host)
    np.testing.assert_array_equal(run_one_element_in(out, [x]), -x.transpose(perm))


def test_widths_named_in_the_header() -> None:
    """The launch note names each side's width."""
    program = harness.check_program(scaled_transpose((3, 5, 4, 8), [0, 3, 1, 2]), 1, PIPELINE,
                                    tolerance=TOLERANCE)
    assert re.search(r"staging loads of 4 consecutive elements, stores of [14]",
                     program.kernels_source), program.kernels_source
