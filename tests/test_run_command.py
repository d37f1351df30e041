"""`fusec run`: compile-and-run and OUT directories, inputs from .npz or
random, `--check` against the reference, and clear errors for bad input."""

from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from fusec.compiler import run_command
from fusec.compiler.cli import main

MODEL = """
func.func @f(%x: tensor<2x8xf32>, %w: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>) {
  %0 = nn.mul %x, %w : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %1 = nn.tanh %0 : tensor<2x8xf32>
  %2 = nn.reduce_sum %1 {axes = [1], keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  func.return %1, %2 : tensor<2x8xf32>, tensor<2x1xf32>
}
"""

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.mlir"
    path.write_text(MODEL)
    return path


@pytest.fixture
def out(model: Path, tmp_path: Path) -> Path:
    out = tmp_path / "out"
    assert main([str(model), "-o", str(out)]) == 0
    return out


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["run", *argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out, captured.err


def inputs_npz(tmp_path: Path, **arrays: np.ndarray) -> str:
    path = tmp_path / "in.npz"
    np.savez(path, **arrays)  # pyright: ignore[reportArgumentType]
    return str(path)


def test_check_passes_on_a_model(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, _ = run(capsys, str(model), "--check", "--device", "sim")
    assert code == 0
    assert "output_0: float32 (2, 8)" in stdout and "output_1: float32 (2, 1)" in stdout
    assert stdout.count(" ok\n") == 2 and "check passed" in stdout


def test_out_directory_with_inputs_and_outputs(
    out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)
    w = np.full(8, 0.5, np.float32)
    result = tmp_path / "result.npz"
    code, _, _ = run(capsys, str(out), "--inputs", inputs_npz(tmp_path, x=x, w=w),
                     "--output", str(result), "--check")
    assert code == 0
    with np.load(result) as npz:
        assert npz.files == ["output_0", "output_1"]
        np.testing.assert_allclose(npz["output_0"], np.tanh(x * w), rtol=1e-5)
        np.testing.assert_allclose(npz["output_1"], np.tanh(x * w).sum(1, keepdims=True),
                                   rtol=1e-5, atol=1e-6)


SCALAR_CONSTANT = """
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %a = nn.constant dense<0.5> : tensor<f32>
  %b = nn.constant dense<3.0> : tensor<f32>
  %c = nn.mul %a, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %y = nn.mul %x, %c : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  func.return %y : tensor<8xf32>
}
"""


def test_out_directory_with_a_rank_0_constant_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # fold-constants leaves a tensor<f32> constant; it was saved with shape
    # [1] (np.ascontiguousarray makes 0-d arrays 1-d), so the OUT just
    # written was refused as damaged
    model = tmp_path / "scalar.mlir"
    model.write_text(SCALAR_CONSTANT)
    out = tmp_path / "scalar_out"
    assert main([str(model), "-o", str(out)]) == 0
    code, stdout, err = run(capsys, str(out), "--check", "--device", "sim")
    assert code == 0, err
    assert "check passed" in stdout
    with np.load(out / "constants.npz") as npz:
        assert all(npz[k].shape == () for k in npz.files)


def test_check_fails_over_tolerance(model: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_command, "tolerance_of", lambda _dtype: -1.0)
    monkeypatch.setattr(run_command, "ABSOLUTE_FLOOR_ROUNDOFFS", -1)
    code, stdout, _ = run(capsys, str(model), "--check")
    assert code == 1
    assert "FAIL" in stdout and "check FAILED" in stdout


DOMAIN_MODEL = """
func.func @f(%x: tensor<2x3x2xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>,
             %v: tensor<3xf32>, %w: tensor<3xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xf32>) {
  %var = nn.sub %v, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %y = nn.batch_norm %x, %s, %b, %m, %var {epsilon = 1.0e-05}
      : (tensor<2x3x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
      -> tensor<2x3x2xf32>
  %n = nn.neg %x : tensor<2x3x2xf32>
  %l = nn.log %n : tensor<2x3x2xf32>
  %e = nn.exp %l : tensor<2x3x2xf32>
  func.return %y, %e : tensor<2x3x2xf32>, tensor<2x3x2xf32>
}
"""


@pytest.mark.parametrize("fusion", [[], ["--no-fusion"]])
def test_check_passes_where_random_inputs_leave_the_domain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fusion: list[str]
) -> None:
    """A computed variance and the log of N(0, 1) values go negative with
    the default inputs: the kernels give NaN where the reference does."""
    path = tmp_path / "domain.mlir"
    path.write_text(DOMAIN_MODEL)
    code, stdout, _ = run(capsys, str(path), "--check", "--device", "sim", *fusion)
    assert code == 0, stdout
    assert stdout.count(" ok\n") == 2 and "check passed" in stdout


def test_compare() -> None:
    ref = np.array([1.0, -2.0, np.nan, np.inf])
    assert run_command.compare(ref.astype(np.float32), ref)[0]
    assert not run_command.compare(np.array([1.0, -2.0, 0.0, np.inf], np.float32), ref)[0]
    assert not run_command.compare(np.array([1.01, -2.0, np.nan, np.inf], np.float32), ref)[0]
    assert run_command.compare(np.array([1, 2], np.int64), np.array([1, 2]))[0]
    assert not run_command.compare(np.array([True]), np.array([False]))[0]


def test_compare_has_an_absolute_floor() -> None:
    """gelu(-7) is 0 in float32 and -2.6e-10 in float64: an output whose
    values are all near zero passes within a few unit roundoffs, no more."""
    ref = np.full(4, -2.6e-10)
    assert run_command.compare(np.zeros(4, np.float32), ref)[0]
    assert run_command.compare(ref + 1e-19, ref)[0]
    assert not run_command.compare(np.full(4, 1e-5, np.float32), ref)[0]
    assert not run_command.compare(np.full(4, 1e-12), ref)[0]
    assert not run_command.compare(np.array([0, 1.0], np.float32), np.array([0, 1.01]))[0]


def test_check_passes_on_outputs_near_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "gelu.mlir"
    path.write_text("func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n"
                    "  %y = nn.gelu %x : tensor<4xf32>\n  func.return %y : tensor<4xf32>\n}\n")
    x = np.full(4, -7.0, np.float32)
    code, stdout, _ = run(capsys, str(path), "--inputs", inputs_npz(tmp_path, x=x), "--check",
                          "--device", "sim")
    assert code == 0, stdout
    assert "check passed" in stdout


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"x": np.zeros((2, 8), np.float32)}, "has no array 'w' (input of @f; it has: x)"),
        ({"x": np.zeros((2, 7), np.float32), "w": np.zeros(8, np.float32)},
         "input 'x' of @f: expected shape (2, 8), got (2, 7)"),
        ({"x": np.zeros((2, 8), np.float32), "w": np.zeros(8, np.int32)},
         "input 'w' of @f: expected dtype float32, got int32"),
    ],
)
def test_bad_npz_names_the_key(out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               arrays: dict[str, np.ndarray], message: str) -> None:
    code, _, err = run(capsys, str(out), "--inputs", inputs_npz(tmp_path, **arrays))
    assert code == 1
    assert message in err


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda out: (out / "plan.json").unlink(), "plan.json' is missing"),
        (lambda out: (out / "plan.json").write_text("{not json"), "plan.json' is corrupt"),
        (lambda out: (out / "plan.json").write_text('{"format": "fusec-plan", "version": 1, '
                                                    '"functions": {"f": {}}}'),
         "plan.json' is invalid at $: missing field 'kernels'"),
        (lambda out: (out / "constants.npz").write_bytes(b"garbage"), "constants.npz' is corrupt"),
        (lambda out: (out / "kernels.py").unlink(), "kernels.py' is missing"),
        (lambda out: (out / "kernels.py").write_text("def (:"), "does not match the sha256"),
    ],
)
def test_damaged_out_is_a_clear_error(out: Path, capsys: pytest.CaptureFixture[str],
                                      damage: object, message: str) -> None:
    damage(out)  # type: ignore[operator]
    code, _, err = run(capsys, str(out))
    assert code == 1
    assert message in err


def test_missing_model_and_unknown_function(model: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, str(tmp_path / "nope.mlir"))
    assert code == 1 and "no such file or directory" in err
    code, _, err = run(capsys, str(model), "--function", "g")
    assert code == 1 and "no function @g" in err


def test_plan_json_of_out_is_what_run_reads(out: Path) -> None:
    plan = json.loads((out / "plan.json").read_text())
    assert plan["format"] == "fusec-plan" and "memory" in plan["functions"]["f"]


def _emitter_missing(module: str) -> bool:
    return importlib.util.find_spec(module) is None


@pytest.mark.parametrize(
    "example",
    [
        "softmax.mlir",
        "mlp.mlir",
        pytest.param("inverted_residual.mlir", marks=pytest.mark.xfail(
            _emitter_missing("fusec.codegen.window"), reason="window emitter not written yet")),
    ],
)
def test_examples_check_in_the_simulator(example: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, err = run(capsys, str(EXAMPLES / example), "--check", "--device", "sim")
    assert code == 0, stdout + err
    assert "check passed" in stdout


INF_MODEL = """
func.func @f(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.sub %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = nn.exp %0 : tensor<4xf32>
  %2 = nn.div %1, %0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %2 : tensor<4xf32>
}
"""


def test_inf_inputs_give_no_numpy_warnings(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "inf.mlir"
    model.write_text(INF_MODEL)
    x = np.array([np.inf, -np.inf, 1, 0], np.float32)
    y = np.array([np.inf, 1, 1, 0], np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, stdout, _ = run(capsys, str(model), "--inputs", inputs_npz(tmp_path, x=x, y=y),
                              "--check", "--device", "sim")
    assert code == 0 and "check passed" in stdout
    assert [str(w.message) for w in caught] == []


def test_check_of_a_bf16_model(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """bf16 outputs come back as float32 values and are checked at bf16's
    tolerance (at f32's, the rounding of the output alone fails)."""
    t = "tensor<4x16xbf16>"
    path = tmp_path / "bf.mlir"
    path.write_text(f"func.func @f(%x: {t}, %y: {t}) -> {t} {{\n"
                    f"  %e = nn.exp %x : {t}\n"
                    f"  %s = nn.mul %e, %y : ({t}, {t}) -> {t}\n"
                    f"  func.return %s : {t}\n}}\n")
    result = tmp_path / "out.npz"
    code, stdout, _ = run(capsys, str(path), "--check", "--device", "sim",
                          "--output", str(result))
    assert code == 0, stdout
    assert "tolerance 0.04" in stdout
    with np.load(result) as npz:
        out = npz["output_0"]
    assert out.dtype == np.float32
    assert np.array_equal(out.view(np.uint32) & 0xFFFF, np.zeros_like(out.view(np.uint32)))


def test_out_directory_of_a_bf16_model_with_constants(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A bf16 constant is saved as the bit patterns plan.json says it holds
    (it was saved as float32 values, and `fusec run OUT` refused the OUT just
    written as damaged), and a rank-0 bf16 output keeps its shape (its
    float32 values came back 1-d)."""
    t, c = "tensor<2x8xbf16>", "tensor<8xbf16>"
    path = tmp_path / "bfc.mlir"
    path.write_text(
        f"func.func @f(%x: {t}) -> ({t}, tensor<bf16>) {{\n"
        f"  %c = nn.constant dense<[1.5, 2.0, -3.0, 4.25, 0.5, 6.0, 7.0, -8.0]> : {c}\n"
        f"  %y = nn.mul %x, %c : ({t}, {c}) -> {t}\n"
        f"  %s = nn.reduce_sum %y {{axes = [0, 1]}} : ({t}) -> tensor<bf16>\n"
        f"  func.return %y, %s : {t}, tensor<bf16>\n}}\n")
    out = tmp_path / "out"
    assert main([str(path), "-o", str(out)]) == 0
    with np.load(out / "constants.npz") as npz:
        assert [npz[k].dtype for k in npz.files] == [np.dtype(np.uint16)]
    result = tmp_path / "result.npz"
    code, stdout, err = run(capsys, str(out), "--check", "--device", "sim",
                            "--output", str(result))
    assert code == 0, stdout + err
    assert "check passed" in stdout
    with np.load(result) as npz:
        assert npz["output_1"].shape == ()
