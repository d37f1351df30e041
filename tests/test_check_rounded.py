"""The type-rounded reference (`run_typed(..., round_stored=True)`): every
argument and op result rounded to its declared element type, and `fusec run
--check` comparing with it for half-precision programs and for values beyond
their type's range."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.func import FuncOp

from fusec.compiler.cli import main
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.element_types import round_to_bf16
from fusec.reference.interpreter import find_function, random_inputs, run_typed

# x * y of values near 1e20 is 1e40: inf in f32, finite in float64.
OVERFLOW = """
func.func @f(%x: tensor<2x4xf32>, %y: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %p = nn.mul %x, %y : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %s = nn.sub %p, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  func.return %s : tensor<2x4xf32>
}
"""

# x + 256 - 256 in bf16 (spacing 2 at 256): stored after each op, the
# fraction of x is lost; the float64 reference keeps it.
CANCEL_BF16 = """
func.func @f(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %c = nn.constant dense<256.0> : tensor<bf16>
  %a = nn.add %x, %c : (tensor<4x8xbf16>, tensor<bf16>) -> tensor<4x8xbf16>
  %s = nn.sub %a, %c : (tensor<4x8xbf16>, tensor<bf16>) -> tensor<4x8xbf16>
  func.return %s : tensor<4x8xbf16>
}
"""


def _func(text: str) -> FuncOp:
    return find_function(parse_module(make_context(), text, "m.mlir"))


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["run", *argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out


def _overflow_inputs(tmp_path: Path) -> str:
    rng = np.random.default_rng(7)
    path = tmp_path / "in.npz"
    np.savez(path, x=(rng.uniform(1, 3, (2, 4)) * 1e20).astype(np.float32),
             y=(rng.uniform(1, 3, (2, 4)) * 1e20).astype(np.float32))
    return str(path)


def test_rounded_reference_rounds_each_result_and_reports_overflow() -> None:
    func = _func(OVERFLOW)
    rng = np.random.default_rng(3)
    x, y = rng.uniform(1, 3, (2, 4)) * 1e20, rng.uniform(1, 3, (2, 4)) * 1e20
    exact = run_typed(func, [x, y])
    assert np.all(np.isfinite(exact.outputs[0]))
    np.testing.assert_allclose(exact.outputs[0], x * y - x)
    assert exact.overflowed == ("%p (f32)", "%s (f32)")
    rounded = run_typed(func, [x, y], round_stored=True)
    assert np.all(np.isposinf(rounded.outputs[0]))
    # In range, each result is the float32 rounding of the op on float32 operands.
    small = [rng.standard_normal((2, 4)), rng.standard_normal((2, 4))]
    (got,) = run_typed(func, small, round_stored=True).outputs
    x32, y32 = (a.astype(np.float32) for a in small)
    want = (x32.astype(np.float64) * y32).astype(np.float32).astype(np.float64) - x32
    np.testing.assert_array_equal(got, want.astype(np.float32))
    assert run_typed(func, small).overflowed == ()


def test_rounded_reference_rounds_bf16_to_nearest_even() -> None:
    func = _func(CANCEL_BF16)
    (x,) = random_inputs(func, seed=2)
    (exact,) = run_typed(func, [x]).outputs
    (rounded,) = run_typed(func, [x], round_stored=True).outputs
    np.testing.assert_allclose(exact, x, atol=1e-4)
    a = round_to_bf16(round_to_bf16(x).astype(np.float64) + 256.0)
    np.testing.assert_array_equal(rounded, round_to_bf16(a.astype(np.float64) - 256.0))
    assert np.array_equal(rounded, np.round(rounded))  # sums rounded to whole numbers


def test_check_passes_an_f32_overflow_against_the_rounded_reference(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "overflow.mlir"
    model.write_text(OVERFLOW)
    code, out = _run(capsys, str(model), "--inputs", _overflow_inputs(tmp_path), "--check",
                     "--device", "sim")
    assert code == 0, out
    assert "reference: float64, and every value rounded to its element type" in out
    assert "%p (f32) and 1 more value beyond their types' range in float64" in out
    assert "ok, matching the rounded reference (against float64: " in out
    assert "8 NaN/inf elements differ" in out and "check passed" in out


def test_check_of_an_f32_program_in_range_uses_float64_only(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "in_range.mlir"
    model.write_text(OVERFLOW)
    code, out = _run(capsys, str(model), "--check", "--device", "sim")
    assert code == 0 and "check passed" in out
    assert "rounded" not in out


@pytest.mark.parametrize("fusion", [[], ["--no-fusion"]])
def test_check_passes_bf16_stored_per_op_against_the_rounded_reference(
        fusion: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "cancel.mlir"
    model.write_text(CANCEL_BF16)
    code, out = _run(capsys, str(model), "--check", "--device", "sim", "--seed", "4", *fusion)
    assert code == 0, out
    assert "(the program has bf16 values)" in out and "check passed" in out
    # Unfused, each sum is stored as bf16: far from float64, equal to the
    # rounded reference; fused, the sum stays in f32 registers and matches float64.
    matched_rounded = "max abs err 0, max rel err 0 (tolerance 0.04) ok, matching the rounded"
    assert (matched_rounded in out) == bool(fusion)


def test_check_still_fails_when_neither_reference_matches(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from fusec.compiler import run_command

    monkeypatch.setattr(run_command, "tolerance_of", lambda _dtype: -1.0)
    monkeypatch.setattr(run_command, "ABSOLUTE_FLOOR_ROUNDOFFS", -1)
    model = tmp_path / "cancel.mlir"
    model.write_text(CANCEL_BF16)
    code, out = _run(capsys, str(model), "--check", "--device", "sim", "--no-fusion")
    assert code == 1
    assert "FAIL (rounded reference: max abs err 0, max rel err 0)" in out
    assert "check FAILED" in out
