"""`fusec run --profile [--roofline FILE.svg]` end to end in the simulator
(where the launches are timed on the host's clock, with a note), and its
argument errors: one line, exit 1, nothing run or overwritten."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from fusec.compiler.cli import main
from fusec.runtime.launch_timer import PROFILE_CALLS

MODEL = """
func.func @f(%x: tensor<3x8xf32>, %w: tensor<8xf32>) -> (tensor<3x8xf32>, tensor<3x1xf32>) {
  %0 = nn.mul %x, %w : (tensor<3x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  %1 = nn.tanh %0 : tensor<3x8xf32>
  %2 = nn.reduce_sum %1 {axes = [1], keepdims = true} : (tensor<3x8xf32>) -> tensor<3x1xf32>
  func.return %1, %2 : tensor<3x8xf32>, tensor<3x1xf32>
}
"""
NS = {"svg": "http://www.w3.org/2000/svg"}


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.mlir"
    path.write_text(MODEL)
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["run", *argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out, captured.err


def _table(stdout: str) -> list[str]:
    """The launch rows of the profile table."""
    return [line for line in stdout.splitlines() if re.match(r"\d+  \S+_g\d+", line)]


def test_profile_of_an_unfused_model_with_a_roofline(
        model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    svg = tmp_path / "roofline.svg"
    rng = np.random.default_rng(20261206)
    x, w = rng.standard_normal((3, 8)).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    inputs = tmp_path / "in.npz"
    np.savez(inputs, x=x, w=w)
    result = tmp_path / "result.npz"
    code, out, err = run(capsys, str(model), "--no-fusion", "--device", "sim", "--profile",
                         "--roofline", str(svg), "--inputs", str(inputs), "--output",
                         str(result), "--check")
    assert code == 0, err
    assert "check passed" in out
    with np.load(result) as npz:  # the run's outputs, before the profile's calls
        np.testing.assert_allclose(npz["output_0"], np.tanh(x * w), rtol=1e-5)
    assert "--profile in the simulator" in err and "say nothing of a GPU" in err
    assert (f"profile of @f on numba's CUDA simulator: each launch's median of {PROFILE_CALLS} "
            "calls after a warm-up call") in out
    assert "copy floor" in out and "(target " in out
    rows = _table(out)
    assert [r.split()[1] for r in rows] == ["f_g0_mul", "f_g1_tanh", "f_g2_reduce_sum"]
    for row in rows:
        cells = row.split()
        assert float(cells[2]) > 0  # microseconds, measured
        assert cells[-1] in ("memory", "compute")
    # 24 multiplies reading x (96 B) and w (32 B), writing 96 B: flops 24, bytes 224.
    assert rows[0].split()[4] == "224" and " 24 " in rows[0]
    assert re.search(r"^   total +[\d.]+ ", out, re.M)
    assert re.search(r"^memory-bound: 3 of 3 launches, .* of the copy floor$", out, re.M)
    assert f"wrote {svg}" in out
    root = ET.fromstring(svg.read_bytes())
    title = root.findtext("svg:title", namespaces=NS) or ""
    assert re.fullmatch(r"fusec roofline: @f on numba's CUDA simulator, \d{4}-\d\d-\d\d", title)
    points = [g for g in root.iterfind("svg:g", NS) if g.get("class") == "point"]
    assert [g.findtext("svg:text", namespaces=NS) for g in points] == [
        "0 f_g0_mul", "1 f_g1_tanh", "2 f_g2_reduce_sum"]
    assert not list(tmp_path.glob(".roofline.svg.*"))  # no temporary file left


def test_profile_of_an_out_directory(model: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "out"
    assert main([str(model), "-o", str(out_dir), "--target", "a100"]) == 0
    capsys.readouterr()
    code, out, _ = run(capsys, str(out_dir), "--profile", "--device", "sim", "--check")
    assert code == 0 and "check passed" in out
    assert "(target a100)" in out  # the profile plan.json names
    rows = _table(out)
    assert len(rows) == 1 and rows[0].split()[-1] in ("memory", "compute")
    assert not list(tmp_path.glob("*.svg"))


@pytest.mark.parametrize("case", ["directory", "no parent", "the model", "a file of OUT",
                                  "the --output file", "the inputs"])
def test_a_roofline_path_that_cannot_be_written_is_refused_before_running(
        case: str, model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "out"
    assert main([str(model), "-o", str(out_dir)]) == 0
    capsys.readouterr()
    inputs = tmp_path / "in.npz"
    np.savez(inputs, x=np.ones((3, 8), np.float32), w=np.ones(8, np.float32))
    given = {"directory": (str(model), str(tmp_path)),
             "no parent": (str(model), str(tmp_path / "missing" / "r.svg")),
             "the model": (str(model), str(model)),
             "a file of OUT": (str(out_dir), str(out_dir / "plan.json")),
             "the --output file": (str(model), str(tmp_path / "same.npz")),
             "the inputs": (str(model), str(inputs))}
    source, svg = given[case]
    before = {p: p.read_bytes() for p in [model, *out_dir.iterdir(), inputs]}
    code, out, err = run(capsys, source, "--roofline", svg, "--device", "sim", "--inputs",
                         str(inputs), "--output", str(tmp_path / "same.npz"))
    assert code == 1
    assert out == ""  # nothing ran
    assert len(err.strip().splitlines()) == 1 and "error: " in err
    expected = {"directory": "it is a directory", "no parent": "does not exist",
                "the model": "is the same as output file",
                "a file of OUT": "is the same as output file",
                "the --output file": "--roofline and --output both name",
                "the inputs": "is the same as output file"}[case]
    assert expected in err
    assert {p: p.read_bytes() for p in before} == before
    assert not (tmp_path / "same.npz").exists()


def test_calls_rotate_over_copies_of_arguments_that_fit_the_l2(model: Path) -> None:
    from fusec.compiler.compile import compile_model
    from fusec.runtime.compiled_model import CompiledModel
    from fusec.runtime.launch_timer import time_launches
    from fusec.runtime.tuning_timer import MAX_COPIES, rotation_copies

    artifacts = compile_model(model, fusion=False, target="h200")
    m = CompiledModel(artifacts.program, artifacts.memory, artifacts.plan, "sim")
    rng = np.random.default_rng(7)
    inputs = [rng.standard_normal((3, 8)).astype(np.float32),
              rng.standard_normal(8).astype(np.float32)]
    m(*inputs)
    # 96 + 32 bytes in, 96 + 12 out, and the buffers between the launches.
    nbytes = 96 + 32 + 96 + 12 + m.executor.memory.total_bytes
    l2 = 20 * nbytes
    times = time_launches(m.executor, inputs, l2_bytes=l2, calls=3)
    assert times.copies == rotation_copies(nbytes, l2) == 40 < MAX_COPIES
    assert times.calls == 3 and len(times.us) == 3 and min(times.us) > 0
    assert time_launches(m.executor, inputs, l2_bytes=0, calls=1).copies == 1
