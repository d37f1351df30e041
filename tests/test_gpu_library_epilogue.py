"""Library GEMMs with their epilogue in the cuBLASLt call on a real GPU
(skipped without one): every epilogue variant x f32 / f16 / bf16 x plain,
transposed and batched operands against the reference interpreter at the
element type's tolerance, each epilogue through `CublasLt.verify`, and one
model under CUDA-graph capture. The cases live in
bench/library_epilogue_check.py, which prints them all in one run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from library_epilogue_check import (  # noqa: E402
    LAYOUTS,
    TYPES,
    VARIANTS,
    Variant,
    check,
    direct_verify,
)


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path / "cache"))
    pytest.importorskip("cupy")


@pytest.mark.parametrize("v", VARIANTS, ids=[v.name for v in VARIANTS])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dt", TYPES)
def test_epilogue_matches_the_reference(v: Variant, layout: str, dt: str) -> None:
    ok, line = check(v, dt, layout)
    assert ok, line


def test_each_epilogue_verifies_directly() -> None:
    lines = direct_verify()
    assert not [line for line in lines if line.startswith("FAIL")], "\n".join(lines)


def test_epilogue_under_graph_capture() -> None:
    ok, line = check(VARIANTS[4], "f16", "transpose_b", graphs=True)
    assert ok, line
