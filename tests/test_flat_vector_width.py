"""Wide accesses of the flat schedule of pointwise groups with views
(`scheduling/flat_vector.py`, `codegen/lane_loads.py`): the width the plan
chooses for a few shapes (read from the generated kernel), the numbers of
every such kernel against the reference interpreter through `fusec run
--check` (fresh random inputs), the fallback to one element per access for
odd and prime extents, unaligned crops and gathers along the innermost axis,
and the copy the runtime makes of an input that is not aligned."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from fusec.compiler.cli import main
from tests.codegen_harness import run_one_element_in

SHUFFLE = """
func.func @f(%x: tensor<2x12x3xNxT>, %b: tensor<NxT>) -> (tensor<2x12x3xNxT>) {
  %r = nn.reshape %x : (tensor<2x12x3xNxT>) -> tensor<2x3x4x3xNxT>
  %t = nn.transpose %r {perm = [0, 2, 1, 3, 4]} : (tensor<2x3x4x3xNxT>) -> tensor<2x4x3x3xNxT>
  %s = nn.reshape %t : (tensor<2x4x3x3xNxT>) -> tensor<2x12x3xNxT>
  %y = nn.add %s, %b : (tensor<2x12x3xNxT>, tensor<NxT>) -> tensor<2x12x3xNxT>
  func.return %y : tensor<2x12x3xNxT>
}
"""

PERMUTE = """
func.func @f(%x: tensor<3x5xNxT>) -> (tensor<5x3xNxT>) {
  %t = nn.transpose %x {perm = [1, 0, 2]} : (tensor<3x5xNxT>) -> tensor<5x3xNxT>
  %y = nn.neg %t : tensor<5x3xNxT>
  func.return %y : tensor<5x3xNxT>
}
"""

HEAD_MERGE = """
func.func @f(%x: tensor<2x3x5xNxT>) -> (tensor<2x5xMxT>) {
  %t = nn.transpose %x {perm = [0, 2, 1, 3]} : (tensor<2x3x5xNxT>) -> tensor<2x5x3xNxT>
  %r = nn.reshape %t : (tensor<2x5x3xNxT>) -> tensor<2x5xMxT>
  %y = nn.relu %r : tensor<2x5xMxT>
  func.return %y : tensor<2x5xMxT>
}
"""

COMPUTED_ROOT = """
func.func @f(%x: tensor<6x4xNxT>, %k: tensor<1xT>) -> (tensor<2x3x4xNxT>) {
  %m = nn.mul %x, %k : (tensor<6x4xNxT>, tensor<1xT>) -> tensor<6x4xNxT>
  %s = nn.sigmoid %m : tensor<6x4xNxT>
  %r = nn.reshape %s : (tensor<6x4xNxT>) -> tensor<2x3x4xNxT>
  %t = nn.transpose %r {perm = [0, 2, 1, 3]} : (tensor<2x3x4xNxT>) -> tensor<2x4x3xNxT>
  %y = nn.reshape %t : (tensor<2x4x3xNxT>) -> tensor<2x3x4xNxT>
  func.return %y : tensor<2x3x4xNxT>
}
"""

GATHER_ROWS = """
func.func @f(%table: tensor<10xNxT>, %ids: tensor<7xi32>) -> (tensor<7xNxT>) {
  %g = nn.gather %table, %ids {axis = 0} : (tensor<10xNxT>, tensor<7xi32>) -> tensor<7xNxT>
  %y = nn.neg %g : tensor<7xNxT>
  func.return %y : tensor<7xNxT>
}
"""

GATHER_COLUMNS = """
func.func @f(%table: tensor<5xNxT>, %ids: tensor<8xi32>) -> (tensor<5x8xT>) {
  %g = nn.gather %table, %ids {axis = 1} : (tensor<5xNxT>, tensor<8xi32>) -> tensor<5x8xT>
  %y = nn.neg %g : tensor<5x8xT>
  func.return %y : tensor<5x8xT>
}
"""

CROP = """
func.func @f(%x: tensor<4x20xT>) -> (tensor<2x8xT>) {
  %s = nn.slice %x {starts = [1, S], limits = [3, E], strides = [1, 1]}
      : (tensor<4x20xT>) -> tensor<2x8xT>
  %y = nn.neg %s : tensor<2x8xT>
  func.return %y : tensor<2x8xT>
}
"""


def _program(template: str, dtype: str, n: int, **more: int) -> str:
    text = template.replace("xT>", f"x{dtype}>").replace("<T>", f"<{dtype}>")
    text = text.replace("xNx", f"x{n}x").replace("<Nx", f"<{n}x")
    for key, value in more.items():
        text = text.replace(f"x{key}x", f"x{value}x").replace(f", {key}]", f", {value}]")
        text = text.replace(f"[3, {key}]", f"[3, {value}]")
    return text


# (case, program, lanes and the wide helpers the kernel calls; 1: one element per access)
CASES = [
    ("shuffle_bf16", _program(SHUFFLE, "bf16", 8), 8, ("ld_vec4_u32(in0", "st_vec4_u32(out0")),
    ("shuffle_f16", _program(SHUFFLE, "f16", 16), 8, ("ld_vec4_u32(in0", "st_vec4_u32(out0")),
    ("shuffle_bf16_12", _program(SHUFFLE, "bf16", 12), 4, ("ld_wide64(in0", "st_wide64(out0")),
    ("shuffle_f32", _program(SHUFFLE, "f32", 8), 4, ("ld_vec4_f32(in0", "st_vec4_f32(out0")),
    ("shuffle_f16_6", _program(SHUFFLE, "f16", 6), 2, ("ld_wide32(in0", "st_wide32(out0")),
    ("shuffle_bf16_prime", _program(SHUFFLE, "bf16", 7), 1, ()),
    ("shuffle_f32_6", _program(SHUFFLE, "f32", 6), 1, ()),
    ("permute_f32", _program(PERMUTE, "f32", 8), 4, ("ld_vec4_f32(in0",)),
    ("permute_bf16_odd", _program(PERMUTE, "bf16", 37), 1, ()),
    ("head_merge_bf16", _program(HEAD_MERGE, "bf16", 8, M=24), 8, ("ld_vec4_u32(in0",)),
    ("head_merge_f16_4", _program(HEAD_MERGE, "f16", 4, M=12), 4, ("ld_wide64(in0",)),
    ("head_merge_bf16_odd", _program(HEAD_MERGE, "bf16", 5, M=15), 1, ()),
    ("computed_root_bf16", _program(COMPUTED_ROOT, "bf16", 4), 4, ("ld_wide64(in0",)),
    ("computed_root_f32", _program(COMPUTED_ROOT, "f32", 8), 4, ("ld_vec4_f32(in0",)),
    ("gather_rows_bf16", _program(GATHER_ROWS, "bf16", 12), 4, ("ld_wide64(in0",)),
    ("gather_rows_f32", _program(GATHER_ROWS, "f32", 8), 4, ("ld_vec4_f32(in0",)),
    ("gather_rows_f32_odd", _program(GATHER_ROWS, "f32", 13), 1, ()),
    # most of a row gathered: the row is staged in shared memory, the results
    # stored wide (tests/test_staged_gather.py); few of a wide row: read in place
    ("gather_columns_bf16", _program(GATHER_COLUMNS, "bf16", 11), 8, ("st_vec4_u32(out0",)),
    ("gather_columns_wide_bf16", _program(GATHER_COLUMNS, "bf16", 400), 1, ()),
    ("crop_aligned_f32", _program(CROP, "f32", 0, S=4, E=12), 4, ("ld_vec4_f32(in0",)),
    ("crop_unaligned_f32", _program(CROP, "f32", 0, S=3, E=11), 1, ()),
    ("crop_unaligned_bf16", _program(CROP, "bf16", 0, S=2, E=10), 2, ("ld_wide32(in0",)),
]


@pytest.fixture(autouse=True)
def _estimates_only(no_ptxas_probe: None) -> None:
    """These tests read kernels and numbers, not register choices."""


def _compile(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> Path:
    prog, out = tmp_path / "p.mlir", tmp_path / "out"
    prog.write_text(text)
    assert main([str(prog), "-o", str(out)]) == 0, capsys.readouterr().err
    return out


@pytest.mark.parametrize(("case", "text", "lanes", "helpers"), CASES, ids=[c[0] for c in CASES])
def test_width_and_numbers(case: str, text: str, lanes: int, helpers: tuple[str, ...],
                           tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kernels = (_compile(tmp_path, text, capsys) / "kernels.py").read_text()
    assert len(re.findall(r"^@cuda\.jit.*\ndef ", kernels, re.M)) == 1  # a 512-thread block's
    if lanes == 1:  # decorator caps the registers (`max_registers`)
        assert "consecutive ones" not in kernels
        assert "    if is_aligned(" not in kernels
    else:
        assert f"in accesses of {lanes} consecutive ones" in kernels
        for helper in helpers:
            assert helper in kernels
    code = main(["run", str(tmp_path / "p.mlir"), "--device", "sim", "--check"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "check passed" in captured.out + captured.err
    assert "Traceback" not in captured.err


@pytest.mark.parametrize(("dtype", "n", "word"), [("f32", 8, "ld_vec4_f32(in0"),
                                                  ("f16", 16, "ld_vec4_u32(in0")])
def test_an_unaligned_input_is_copied_for_the_words(dtype: str, n: int, word: str,
                                                    tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The kernel moves 16-byte words with no alignment test and no
    per-element twin; an input one element into its buffer (2 or 4 bytes
    off) is copied by the runtime first, and the result is the aligned
    one's (the simulator's 16-byte helpers fail on a misaligned address,
    as the GPU does)."""
    out = _compile(tmp_path, _program(PERMUTE, dtype, n), capsys)
    kernels = (out / "kernels.py").read_text()
    assert word in kernels and "    if is_aligned(" not in kernels
    host = np.float32 if dtype == "f32" else np.float16
    x = (np.random.default_rng(7).standard_normal((3, 5, n)) + 2.0).astype(host)
    got = run_one_element_in(out, [x])
    np.testing.assert_array_equal(got, -x.transpose(1, 0, 2))
