"""Errors about the input come before notices about the device, and every
notice is one line in one format, `fusec: note: ...`. Run as a user runs
fusec: the console script, without NUMBA_ENABLE_CUDASIM (which the test
session sets, and which silences the simulator notice)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fusec.compiler.autotune import NO_GPU_NOTE
from fusec.runtime.device import SIM_NOTICE, gpu_available

ROOT = Path(__file__).resolve().parent.parent
SOFTMAX = str(ROOT / "examples" / "softmax.mlir")
NOTE = re.compile(r"^fusec: note: [^\n]+$")
NO_GPU = not gpu_available()


def fusec(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`fusec ARGS` through the console script, as a user's shell runs it."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    script = Path(sys.executable).parent / "fusec"
    return subprocess.run([str(script), *args], capture_output=True, text=True, env=env,
                          cwd=cwd, check=False, timeout=300)


@pytest.mark.parametrize("case", ["missing-model", "not-an-out", "missing-inputs"])
def test_input_errors_come_before_the_device_notice(tmp_path: Path, case: str) -> None:
    (tmp_path / "empty").mkdir()
    args, error = {
        "missing-model": (["run", "missing", "--check"], "error: cannot read 'missing'"),
        "not-an-out": (["run", "empty", "--check"], "error: "),
        "missing-inputs": (["run", SOFTMAX, "--inputs", "none.npz"],
                           "error: cannot read 'none.npz'"),
    }[case]
    done = fusec(*args, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith(error), done.stderr
    assert "simulator" not in done.stderr and "note:" not in done.stderr, done.stderr


@pytest.mark.skipif(not NO_GPU, reason="the simulator notice is printed only without a GPU")
def test_the_simulator_notice_is_one_note_line_before_the_run(tmp_path: Path) -> None:
    done = fusec("run", SOFTMAX, "--check", "--seed", "3")
    assert done.returncode == 0, done.stderr
    assert done.stderr == SIM_NOTICE + "\n"
    assert NOTE.match(SIM_NOTICE)
    assert "check passed" in done.stdout


def test_every_notice_is_one_note_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert fusec(SOFTMAX, "-o", str(out)).returncode == 0
    done = fusec("run", str(out), "--no-fusion", "--device", "sim")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines and all(NOTE.match(line) for line in lines), lines
    assert lines[0].startswith("fusec: note: --no-fusion and --target apply to a .mlir model")
    assert NOTE.match(NO_GPU_NOTE)


def test_import_notices_are_note_lines(tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    onnx_model = ROOT / "tests" / "fixtures" / "onnx" / "mobilenet_v2_small.onnx"
    done = fusec("import", str(onnx_model), "-o", str(tmp_path / "m.mlir"),
                 "--params-above", "1024")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines and all(NOTE.match(line) for line in lines), lines
    assert any("weights are arguments" in line for line in lines)
    with np.load(tmp_path / "m.params.npz") as params:
        assert params.files
