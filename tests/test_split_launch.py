"""The pointwise groups that read slices of one value (a split) run as one
launch, one segment of blocks per group (codegen/split_launch.py). Each
program runs in numba's CUDA simulator against the reference interpreter,
with its kernel count asserted, for splits along every axis of odd and prime
extents, in f32 and bf16; and through `fusec run --check`, as a user meets it.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import codegen_harness as harness
import pytest

from fusec.analysis.program import Program
from tests.test_concat_fusion import HALF_TOLERANCE, PIPELINE
from tests.test_pointwise_views import TOLERANCE, t

ONE_LAUNCH = "one launch for the slices of one value"


def check(text: str, launches: int, dtype: str, seed: int) -> Program:
    """`launches` kernels, numbers as the reference's on inputs of `seed`."""
    if dtype == "f32":
        return harness.check_program(text, launches, PIPELINE, seed=seed, tolerance=TOLERANCE)
    return harness.check_program(text, launches, PIPELINE, seed=seed, rtol=HALF_TOLERANCE,
                                 atol=HALF_TOLERANCE)


def split3(shape: tuple[int, ...], bounds: tuple[int, ...], axis: int, dtype: str) -> str:
    """`x` split along `axis` at `bounds` into three slices: `x0 * 1.25`,
    `tanh(x1)`, `x2 + b` (`b` a bias along the first axis)."""
    rank = len(shape)
    edges = [0, *bounds, shape[axis]]
    tx, ts = t(shape, dtype), t((), dtype)
    rows = shape[0] - bounds[1] if axis == 0 else shape[0]  # the third slice's
    tb = t((rows,) + (1,) * (rank - 1), dtype)
    lines, outs = [], []
    for k, (lo, hi) in enumerate(itertools.pairwise(edges)):
        starts = [lo if d == axis else 0 for d in range(rank)]
        limits = [hi if d == axis else n for d, n in enumerate(shape)]
        tp = t(tuple(hi - lo if d == axis else n for d, n in enumerate(shape)), dtype)
        lines.append(f"  %p{k} = nn.slice %x {{starts = {starts}, limits = {limits}}} "
                     f": ({tx}) -> {tp}")
        outs.append(tp)
    lines += [f"  %c = nn.constant dense<1.25> : {ts}",
              f"  %y0 = nn.mul %p0, %c : ({outs[0]}, {ts}) -> {outs[0]}",
              f"  %y1 = nn.tanh %p1 : {outs[1]}",
              f"  %y2 = nn.add %p2, %b : ({outs[2]}, {tb}) -> {outs[2]}"]
    return (f"func.func @f(%x: {tx}, %b: {tb}) -> ({', '.join(outs)}) {{\n"
            + "\n".join(lines) + f"\n  func.return %y0, %y1, %y2 : {', '.join(outs)}\n}}\n")


@pytest.mark.parametrize(("axis", "dtype"), itertools.product(range(3), ("f32", "bf16")))
def test_split_in_three_along_every_axis_is_one_launch(axis: int, dtype: str) -> None:
    """A 7x13x11 tensor cut into three slices of distinct extents (slices of
    one shape would share one group, one segment)."""
    bounds = [(1, 3), (2, 7), (4, 9)][axis]
    program = check(split3((7, 13, 11), bounds, axis, dtype), 1, dtype, seed=40 + axis)
    assert ONE_LAUNCH in program.kernels_source
    assert program.kernels_source.count("@cuda.jit(device=True, inline=True)\ndef ") == 3


def test_split_segments_of_several_blocks() -> None:
    """Slices of 13x97 and 13x61 rows: several blocks per segment, the last
    of each partial."""
    tx, ta, tb = t((13, 158)), t((13, 97)), t((13, 61))
    first, second = "{starts = [0, 0], limits = [13, 97]}", "{starts = [0, 97], limits = [13, 158]}"
    program = check(f"func.func @f(%x: {tx}) -> ({ta}, {tb}) {{\n"
                    f"  %a = nn.slice %x {first} : ({tx}) -> {ta}\n"
                    f"  %b = nn.slice %x {second} : ({tx}) -> {tb}\n"
                    f"  %ra = nn.silu %a : {ta}\n"
                    f"  %rb = nn.neg %b : {tb}\n"
                    f"  func.return %ra, %rb : {ta}, {tb}\n}}\n", 1, "f32", seed=51)
    assert ONE_LAUNCH in program.kernels_source


def test_a_slice_reading_a_later_value_keeps_its_own_launch() -> None:
    """The second slice's consumer reads a row sum of the first's result,
    computed after the first group: it cannot run in the first group's
    launch, and the numbers stay right."""
    tx, ta, tr = t((6, 7)), t((3, 7)), t((3, 1))
    text = (f"func.func @f(%x: {tx}) -> ({ta}, {ta}) {{\n"
            f"  %a = nn.slice %x {{starts = [0, 0], limits = [3, 7]}} : ({tx}) -> {ta}\n"
            f"  %b = nn.slice %x {{starts = [3, 0], limits = [6, 7]}} : ({tx}) -> {ta}\n"
            f"  %ea = nn.exp %a : {ta}\n"
            f"  %s = nn.reduce_sum %ea {{axes = [1], keepdims = true}} : ({ta}) -> {tr}\n"
            f"  %rb = nn.mul %b, %s : ({ta}, {tr}) -> {ta}\n"
            f"  func.return %ea, %rb : {ta}, {ta}\n}}\n")
    program = harness.compile_text(text, PIPELINE)
    launches = len(program.functions["f"].launches)
    check(text, launches, "f32", seed=61)
    assert ONE_LAUNCH not in program.kernels_source


ROOT = Path(__file__).resolve().parent.parent


def test_fusec_run_check_on_a_split(tmp_path: Path) -> None:
    """Through the command line: compile the split to OUT, one kernel in
    kernels.py, and `fusec run OUT --check` against the reference."""
    src = tmp_path / "split.mlir"
    src.write_text(split3((5, 9, 3), (4, 6), 1, "bf16"))
    out = tmp_path / "out"
    compiled = subprocess.run([sys.executable, "-m", "fusec", str(src), "-o", str(out)],
                              capture_output=True, text=True, cwd=tmp_path)
    assert compiled.returncode == 0, compiled.stderr
    kernels = (out / "kernels.py").read_text()
    assert kernels.count("\n@cuda.jit\n") == 1 and ONE_LAUNCH in kernels
    ran = subprocess.run([sys.executable, "-m", "fusec", "run", str(out), "--check"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "check passed" in ran.stdout + ran.stderr
