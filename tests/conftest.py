"""Shared pytest setup: paths to the example models and the `gpu` marker."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def _has_gpu() -> bool:
    try:
        from numba import cuda

        return bool(cuda.is_available()) and not cuda.is_simulator() if hasattr(
            cuda, "is_simulator") else bool(cuda.is_available())
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `gpu` tests on machines without a CUDA device."""
    if any(item.get_closest_marker("gpu") for item in items) and not _has_gpu():
        skip = pytest.mark.skip(reason="needs a CUDA GPU")
        for item in items:
            if item.get_closest_marker("gpu"):
                item.add_marker(skip)


@pytest.fixture
def examples_dir() -> Path:
    """The bundled small example models."""
    return EXAMPLES
