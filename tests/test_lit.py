"""Runs the lit + filecheck suite under tests/filecheck as one pytest test."""

import shutil
import subprocess
import sys
from pathlib import Path

SUITE = Path(__file__).parent / "filecheck"


def test_filecheck_suite() -> None:
    lit = shutil.which("lit")
    cmd = [lit] if lit else [sys.executable, "-m", "lit"]
    proc = subprocess.run(
        [*cmd, "-v", "--no-progress-bar", str(SUITE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, f"lit failed:\n{proc.stdout}\n{proc.stderr}"
