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
