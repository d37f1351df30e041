"""Wide accesses of the segments of a concat kernel
(`scheduling/segment_vector.py`): the width each segment's plan chooses for
a few shapes (read from the kernel's launch note), the numbers of every such
kernel against the reference interpreter in the simulator (fresh random
inputs, one kernel each), the fallback to one element per access for odd
and prime extents and unaligned shifts, and the per-lane path a kernel takes
when an array passed to it is not aligned."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from fusec.compiler.cli import main
from tests.codegen_harness import run_one_element_in
from tests.test_concat_segments import ROWS, SEGMENTED, by_operand, check, roll, three_parts
from tests.test_pointwise_views import t


def _crop_and_stack(dtype: str) -> str:
    """`-concat(x, y[:, 1:9])` along axis 0: the second operand starts one
    element into each row of `y`."""
    tx, ty, ts, to = t((2, 8), dtype), t((4, 9), dtype), t((4, 8), dtype), t((6, 8), dtype)
    return (f"func.func @f(%x: {tx}, %y: {ty}) -> {to} {{\n"
            f"  %s = nn.slice %y {{starts = [0, 1], limits = [4, 9]}} : ({ty}) -> {ts}\n"
            f"  %c = nn.concat %x, %s {{axis = 0}} : ({tx}, {ts}) -> {to}\n"
            f"  %r = nn.neg %c : {to}\n"
            f"  func.return %r : {to}\n}}\n")


def _long_rows(dtype: str, a: int, b: int) -> str:
    """`tanh(concat(exp(x), y))` of rows `a` and `b` wide along axis 1: rows
    wider than a block's chunk, one segment of blocks per operand."""
    ta, tb, to = t((2, a), dtype), t((2, b), dtype), t((2, a + b), dtype)
    return (f"func.func @f(%x: {ta}, %y: {tb}) -> {to} {{\n"
            f"  %a = nn.exp %x : {ta}\n"
            f"  %c = nn.concat %a, %y {{axis = 1}} : ({ta}, {tb}) -> {to}\n"
            f"  %r = nn.tanh %c : {to}\n"
            f"  func.return %r : {to}\n}}\n")


def _short_rows(dtype: str) -> str:
    """`concat(silu(x), y)` of 11 rows of 8 and 12: blocks of whole rows."""
    ta, tb, to = t((11, 8), dtype), t((11, 12), dtype), t((11, 20), dtype)
    return (f"func.func @f(%x: {ta}, %y: {tb}) -> {to} {{\n"
            f"  %a = nn.silu %x : {ta}\n"
            f"  %c = nn.concat %a, %y {{axis = 1}} : ({ta}, {tb}) -> {to}\n"
            f"  func.return %c : {to}\n}}\n")


def _roll_plus_row(dtype: str) -> str:
    """The data-movement corpus' roll (dm41) at a small size: `x * -0.75`
    rolled by 2 along axis 2, plus a row `b` along the innermost axis (read
    wide, at the result's coordinates)."""
    tx, tb, ts = t((2, 3, 5, 8), dtype), t((8,), dtype), t((), dtype)
    th, tt = t((2, 3, 2, 8), dtype), t((2, 3, 3, 8), dtype)
    return (f"func.func @f(%x: {tx}, %b: {tb}) -> {tx} {{\n"
            f"  %k = nn.constant dense<-0.75> : {ts}\n"
            f"  %m = nn.mul %x, %k : ({tx}, {ts}) -> {tx}\n"
            f"  %hd = nn.slice %m {{starts = [0, 0, 3, 0], limits = [2, 3, 5, 8]}} "
            f": ({tx}) -> {th}\n"
            f"  %tl = nn.slice %m {{starts = [0, 0, 0, 0], limits = [2, 3, 3, 8]}} "
            f": ({tx}) -> {tt}\n"
            f"  %c = nn.concat %hd, %tl {{axis = 2}} : ({th}, {tt}) -> {tx}\n"
            f"  %r = nn.add %c, %b : ({tx}, {tb}) -> {tx}\n"
            f"  func.return %r : {tx}\n}}\n")


# (case, program, dtype, lanes by operand (1: one element per access), layout)
CASES = [
    # a roll along an outer axis: the shift moves whole rows of 8
    ("roll_outer_f32", roll((3, 6, 8), 1, 2, "f32"), "f32", (4, 4), ROWS),
    ("roll_first_bf16", roll((5, 3, 8), 0, 2, "bf16"), "bf16", (8, 8), ROWS),
    ("roll_plus_row_f32", _roll_plus_row("f32"), "f32", (4, 4), ROWS),
    ("roll_plus_row_bf16", _roll_plus_row("bf16"), "bf16", (8, 8), ROWS),
    # along the innermost axis: widths 12 and 4, the second shifted by 12
    ("roll_inner_f32", roll((3, 5, 16), 2, 4, "f32"), "f32", (4, 4), ROWS),
    # widths 14 and 2 shifted by 14: not 4 wide, but 2 halves are
    ("roll_inner_by_2_f32", roll((3, 5, 16), 2, 2, "f32"), "f32", (1, 1), ROWS),
    ("roll_inner_by_2_bf16", roll((3, 5, 16), 2, 2, "bf16"), "bf16", (2, 2), ROWS),
    ("roll_prime_bf16", roll((5, 3, 7), 2, 2, "bf16"), "bf16", (1, 1), ROWS),
    ("three_parts_f32", three_parts((3, 5, 8), (2, 1, 4), 1, "f32"), "f32", (4, 4, 4), ROWS),
    ("three_parts_odd_f32", three_parts((3, 5, 7), (2, 1, 4), 1, "f32"), "f32", (1, 1, 1),
     ROWS),
    ("three_parts_inner_bf16", three_parts((3, 5, 4), (4, 8, 4), 2, "bf16"), "bf16",
     (4, 4, 4), ROWS),
    # each segment decides alone: the crop's rows start one element in
    ("crop_and_stack_f32", _crop_and_stack("f32"), "f32", (4, 1), ROWS),
    ("crop_and_stack_bf16", _crop_and_stack("bf16"), "bf16", (8, 1), ROWS),
    ("short_rows_f32", _short_rows("f32"), "f32", (4, 4), ROWS),
    ("long_rows_f32", _long_rows("f32", 640, 768), "f32", (4, 4), SEGMENTED),
    ("long_rows_bf16", _long_rows("bf16", 640, 768), "bf16", (8, 8), SEGMENTED),
    ("long_rows_bf16_by_4", _long_rows("bf16", 644, 772), "bf16", (4, 4), SEGMENTED),
    ("long_rows_f16_by_2", _long_rows("f16", 642, 766), "f16", (2, 2), SEGMENTED),
    ("long_rows_prime_f32", _long_rows("f32", 641, 769), "f32", (1, 1), SEGMENTED),
]


def lanes_by_operand(source: str, operands: int) -> tuple[int, ...]:
    """Each operand's elements per access, from the kernel's launch note."""
    found = re.search(r"accesses of consecutive elements: ([^\n]*)", source)
    lanes = [1] * operands
    for n, k in re.findall(r"(\d+) for operand (\d+)", found.group(1) if found else ""):
        lanes[int(k)] = int(n)
    return tuple(lanes)


@pytest.mark.parametrize(("case", "text", "dtype", "lanes", "layout"), CASES,
                         ids=[c[0] for c in CASES])
def test_width_and_numbers(case: str, text: str, dtype: str, lanes: tuple[int, ...],
                           layout: str) -> None:
    source = check(text, 1, dtype if dtype == "f32" else "bf16", seed=len(case)).kernels_source
    assert layout in source and by_operand(source)
    assert lanes_by_operand(source, len(lanes)) == lanes
    wide = any(n > 1 for n in lanes)
    assert "    if is_aligned(" not in source  # one version: the runtime aligns arrays
    if wide:  # the words the wide path moves, by element type
        helper = "st_vec4_f32(out0" if dtype == "f32" else {
            8: "st_vec4_u32(out0", 4: "st_wide64(out0", 2: "st_wide32(out0"}[max(lanes)]
        assert helper in source


@pytest.mark.parametrize("text", [_long_rows("f32", 640, 768), _short_rows("f32")],
                         ids=["segments", "rows"])
def test_an_unaligned_operand_is_copied_for_the_words(
        text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        no_ptxas_probe: None) -> None:
    """Operands one element into their buffers (4 bytes off) are copied by
    the runtime before the kernel, which moves its segments' words with no
    alignment test; the result is the one of aligned arrays."""
    prog, out = tmp_path / "p.mlir", tmp_path / "out"
    prog.write_text(text)
    assert main([str(prog), "-o", str(out)]) == 0, capsys.readouterr().err
    launches = next(iter(json.loads((out / "plan.json").read_text())["functions"].values()))[
        "launches"]
    assert len(launches) == 1
    rng = np.random.default_rng(11)
    short = "silu" in text
    x, y = (rng.standard_normal(s).astype(np.float32) for s in (
        ((11, 8), (11, 12)) if short else ((2, 640), (2, 768))))
    if short:
        want = np.concatenate([x / (1 + np.exp(-x)), y], axis=1).reshape(-1)
    else:
        want = np.tanh(np.concatenate([np.exp(x), y], axis=1)).reshape(-1)
    got = run_one_element_in(out, [x, y])
    np.testing.assert_allclose(got.reshape(-1), want, rtol=2e-5, atol=2e-5)
