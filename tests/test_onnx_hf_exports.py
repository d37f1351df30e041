"""bench/onnx_exports.py at its tiny size, without a GPU: Hugging Face
GPT-2, BERT and ViT (random weights, the default SDPA attention) exported
with PyTorch's default ONNX exporter, imported and compiled by fusec, run in
numba's CUDA simulator and compared with onnxruntime on the same inputs
(about 30 s of CPU for the three).

Needs torch, transformers, onnx, onnxscript (the dynamo exporter's) and
onnxruntime, none of them fusec dependencies: skipped without them. The
script runs once, for the three models, in a subprocess, where `--device
cpu` selects the simulator before numba.cuda is imported.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

NEEDS = ("torch", "transformers", "onnx", "onnxscript", "onnxruntime")
pytestmark = [
    pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in NEEDS),
                       reason=f"needs {', '.join(NEEDS)}"),
    pytest.mark.slow,
]

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "onnx_exports.py"


MODELS = ("gpt2", "bert", "vit")


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The script's output for the three models (one torch import, not three)."""
    out = tmp_path_factory.mktemp("results")
    # A low threshold, so that weights travel as arguments as at full size.
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--size", "tiny",
         "--models", ",".join(MODELS), "--params-above", "256", "--out", str(out)],
        capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.parametrize("model", MODELS)
def test_default_attention_export_matches_onnxruntime(model: str, table: str) -> None:
    (row,) = [line for line in table.splitlines() if line.startswith(f"| {model} |")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "sdpa"  # transformers' default attention implementation
    assert cells[4].endswith("(ok)"), row
    nodes, launches = int(cells[2]), int(cells[3].split()[0])
    assert 0 < launches < nodes, row  # fused: fewer kernels than ONNX nodes
