"""bench/onnx_models.py end to end at a tiny size, without a GPU: PyTorch
models exported to ONNX, imported and compiled by fusec (fusion on and off),
run in numba's CUDA simulator and checked against torch eager on the CPU.

Needs torch and onnx (not fusec dependencies): skipped without them, as in CI.
Runs the script in a subprocess, where `--device cpu` selects the simulator
before numba.cuda is imported, whatever this process already loaded.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

# Looked up, not imported: the script imports them in its own process, and
# importing torch here too would add seconds to every test session.
pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("torch", "onnx")),
    reason="needs torch and onnx",
)

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "onnx_models.py"


def _run_small(model: str, out: Path) -> subprocess.Popen[str]:
    # A low threshold, so that weights travel as arguments as at full size.
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), "--small", "--device", "cpu", "--params-above", "256",
         "--models", model, "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


@pytest.mark.slow
def test_small_models_match_torch_in_the_simulator(tmp_path: Path) -> None:
    # One process per model, side by side: the simulator keeps one core busy.
    procs = {name: _run_small(name, tmp_path) for name in ("mobilenet_v2", "gpt2_block")}
    results: dict[str, tuple[int, str, str]] = {}
    try:
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=300)
            results[name] = (proc.returncode, out, err)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    for name, (code, out, err) in results.items():
        assert code == 0, err[-4000:]
        assert f"## {name} via ONNX" in out
        rows = [line for line in out.splitlines()
                if line.startswith(("| fusec |", "| fusion off |"))]
        assert len(rows) == 2, out
        assert all(line.endswith("| ok |") for line in rows), out
        fused, unfused = (int(line.split("|")[2]) for line in rows)
        assert fused < unfused, out
        assert "0 weights passed as arguments" not in out
    # The check-only CPU run writes no results file (no device to name it by).
    assert not any(tmp_path.iterdir())


def test_full_size_needs_a_gpu_or_small() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert "--small" in proc.stderr


def test_unknown_model_is_refused() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--models", "resnet", "--small",
                           "--device", "cpu"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert "unknown model 'resnet'" in proc.stderr
