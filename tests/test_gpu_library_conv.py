"""Library convolutions (cuDNN) on a real GPU (skipped without one or
without cuDNN): every convolution shape x epilogue x f32 / f16 / bf16
against the reference interpreter at the element type's tolerance, and one
model under CUDA-graph capture. A small ResNet
runs its convolutions channels last. The cases live in
bench/library_conv_check.py, which prints them all in one run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from library_conv_check import EPILOGUES, SHAPES, TYPES, Shape, check, check_cnn  # noqa: E402


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fusec.analysis.cudnn_library import cudnn_available

    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path / "cache"))
    if not cudnn_available():
        pytest.skip("cuDNN is not installed")


@pytest.mark.parametrize("epilogue", sorted(EPILOGUES))
@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
@pytest.mark.parametrize("dt", TYPES)
def test_library_conv_matches_the_reference(shape: Shape, epilogue: str, dt: str) -> None:
    ok, line = check(shape, epilogue, dt)
    assert ok, line


def test_library_conv_under_graph_capture() -> None:
    pytest.importorskip("cupy")
    ok, line = check(SHAPES[1], "bn_residual_relu", "f16", graphs=True)
    assert ok, line


@pytest.mark.parametrize("dt", TYPES)
def test_a_resnet_runs_its_convolutions_channels_last(dt: str) -> None:
    ok, line = check_cnn(dt)
    assert ok, line


def test_channels_last_under_graph_capture() -> None:
    pytest.importorskip("cupy")
    ok, line = check_cnn("f16", graphs=True)
    assert ok, line


def test_the_library_clock_times_cudnn_calls() -> None:
    pytest.importorskip("cupy")
    import math

    from fusec.runtime.library_clock import conv_call_us

    for library in ("cudnn_conv_f32", "cudnn_conv_f16", "cudnn_conv_bf16"):
        spec = {"library": library, "strides": [2, 2], "pads": [3, 3, 3, 3],
                "dilations": [1, 1], "groups": 1, "tf32": False}
        us = conv_call_us(spec, [(8, 3, 64, 64), (16, 3, 7, 7), (8, 16, 32, 32)], 50 << 20)
        assert math.isfinite(us) and us > 0.0, (library, us)


def test_a_compile_on_its_gpu_measures_each_cudnn_call(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("cupy")
    import numpy as np

    import fusec
    from fusec.compiler.cli import main
    from fusec.compiler.parsing import make_context, parse_module
    from fusec.reference.interpreter import find_function, random_inputs, run_module
    from tests.test_library_conv import conv_text

    text = conv_text("f16", n=8, c=64, hw=28, o=64)
    model = tmp_path / "m.mlir"
    model.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    assert main([str(model), "-o", str(out), "--remarks", "--no-cache"]) == 0
    err = capsys.readouterr().err
    assert "cuDNN's call measured" in err, err
    reference = parse_module(make_context(), text, "m.mlir")
    inputs = random_inputs(find_function(reference, "f"), seed=3)
    (expected,) = run_module(reference, inputs, "f")
    got = fusec.load_out(out, device="gpu")(*inputs)
    np.testing.assert_allclose(np.asarray(got, np.float32), expected.astype(np.float32),
                               rtol=2e-2, atol=2e-2)
