"""The commit a benchmark result names: `$FUSEC_COMMIT`, else the checkout's
short HEAD, else `unknown` (a copy of the tree without git, as on a GPU
machine the tree is copied to)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def commit() -> str:
    """$FUSEC_COMMIT, else the repository's short HEAD, else `unknown`."""
    if os.environ.get("FUSEC_COMMIT"):
        return os.environ["FUSEC_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent,
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"
