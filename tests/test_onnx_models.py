"""Models exported from PyTorch, imported by `fusec import` and run by the
reference interpreter, against torch's own outputs.

The fixtures (tests/fixtures/onnx/*.onnx and *_io.npz) were written by
tests/fixtures/onnx/make_fixtures.py; CI reads them without torch.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from fusec.command import main as fusec_main  # noqa: E402
from fusec.compiler.parsing import make_context, parse_module  # noqa: E402
from fusec.compiler.verify import verify_module  # noqa: E402
from fusec.importers.onnx import import_model  # noqa: E402
from fusec.reference.interpreter import run_module  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "onnx"
MODELS = ["mobilenet_v2_small", "gpt2_block"]


def _io(name: str) -> tuple[np.ndarray, np.ndarray]:
    data = np.load(FIXTURES / f"{name}_io.npz")
    return data["x"], data["y"]


def _nn_ops(text: str) -> Counter[str]:
    return Counter(line.split("=")[1].split()[0] for line in text.splitlines()
                   if " = nn." in line)


@pytest.mark.parametrize("name", MODELS)
def test_fixture_matches_torch(name: str) -> None:
    """Import, run in float64 and float32, compare with torch (float32)."""
    result = import_model(FIXTURES / f"{name}.onnx")
    x, expected = _io(name)
    for dtype, tol in ((np.float64, 1e-5), (np.float32, 1e-4)):
        (y,) = run_module(result.module, {result.inputs["x"]: x}, dtype=dtype)
        np.testing.assert_allclose(y, expected, rtol=tol, atol=tol)


def test_fixture_files_stay_small() -> None:
    for path in FIXTURES.iterdir():
        assert path.stat().st_size < 1_000_000, path.name


def test_mobilenet_keeps_its_structure() -> None:
    """Depthwise convs keep `groups`, BatchNorm and ReLU6 map to single ops."""
    text = import_model(FIXTURES / "mobilenet_v2_small.onnx").text
    ops = _nn_ops(text)
    assert ops["nn.conv2d"] == 14
    assert ops["nn.batch_norm"] == 14
    assert ops["nn.clamp"] == 10
    assert "groups = 64" in text
    assert "{min = 0.0, max = 6.0}" in text


def test_gpt2_shape_arithmetic_folds() -> None:
    """Exporter shape chains (Shape/Gather/Unsqueeze/Concat) and the causal
    mask (Slice/Equal/Cast of a buffer) fold: no gather, cmp or cast is left."""
    ops = _nn_ops(import_model(FIXTURES / "gpt2_block.onnx").text)
    assert ops["nn.layer_norm"] == 2
    assert ops["nn.softmax"] == 1
    assert ops["nn.matmul"] == 6
    assert not ops["nn.gather"] and not ops["nn.cmp"] and not ops["nn.cast"]


def test_cli_import_writes_parseable_mlir(tmp_path: Path) -> None:
    out = tmp_path / "gpt2.mlir"
    assert fusec_main(["import", str(FIXTURES / "gpt2_block.onnx"), "-o", str(out)]) == 0
    module = parse_module(make_context(), out.read_text(), str(out))
    verify_module(module)
    x, expected = _io("gpt2_block")
    (y,) = run_module(module, {"x": x})
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def test_cli_import_error_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.onnx"
    assert fusec_main(["import", str(missing), "-o", str(tmp_path / "o.mlir")]) == 1
    assert "no such file" in capsys.readouterr().err
    assert not (tmp_path / "o.mlir").exists()
