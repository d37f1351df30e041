"""Shared pytest setup: paths to the example models and the `gpu` marker.

Without a GPU every test process runs kernels in numba's CUDA simulator: the
switch must be set before anything imports numba.cuda, hence at import time.
The key that signs OUT folders (`runtime/user_key.py`) is one made for the
test session in a temporary folder, never the user's own, and so are the
kernel and tuning caches; subprocesses inherit them through
`FUSEC_CONFIG_DIR` and `FUSEC_CACHE_DIR`.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from fusec.runtime.device import gpu_available

if not gpu_available():
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

for _variable, _prefix in (("FUSEC_CONFIG_DIR", "fusec-test-config-"),
                           ("FUSEC_CACHE_DIR", "fusec-test-cache-")):
    if _variable not in os.environ:
        _folder = tempfile.mkdtemp(prefix=_prefix)
        os.environ[_variable] = _folder
        atexit.register(shutil.rmtree, _folder, ignore_errors=True)

# A test compiles what it asks for: a program another test compiled would
# otherwise come back from the compiled-program cache, past whatever this test
# patched (tests/test_program_cache.py turns the cache on for itself).
os.environ.setdefault("FUSEC_PROGRAM_CACHE", "0")
# The same for the traced graphs the torch backend keeps
# (tests/test_torch_trace_cache.py turns that cache on for itself).
os.environ.setdefault("FUSEC_TRACE_CACHE", "0")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def _has_gpu() -> bool:
    # Asked of the driver, not of numba.cuda: the simulator reports itself available.
    return gpu_available() and os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0")


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


@pytest.fixture
def no_ptxas_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """register-budget decides by its estimate alone (no time for ptxas):
    for tests of something else that compile large models many times."""
    from fusec.codegen import kernel_probe

    monkeypatch.setattr(kernel_probe, "PROBE_BUDGET_S", 0.0)
