"""Writing an OUT directory whole or not at all, for the compile job
(`compiler/compile.py`) and for a compile the program cache answers
(`compiler/cli_cache.py`).

The caller fills a temporary directory beside OUT with every file but
plan.json; plan.json is written last, signed with the user's key over the
files already there (`runtime/out_signature.py`), then the marker
(`compiler/out_marker.py`), and the directory replaces OUT in one rename. An
existing OUT is replaced only if fusec wrote it. Nothing here imports xDSL:
a compile answered from the cache never loads it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fusec.analysis.diagnostics import FusecError
from fusec.compiler.out_marker import MARKER, check_replaceable, write_marker
from fusec.compiler.outputs import (
    make_staging_dir,
    replace_directory,
    stop_cleanly,
    through_link,
)

OUT_FILES = ("model.mlir", "kernels.py", "plan.json", "report.md", "constants.npz", MARKER)
# Folders fusec may write into OUT (`--save-kernels`).
OUT_FOLDERS = ("kernels",)


def write_out_folder(out_dir: str | Path, plan: dict[str, Any],
                     fill: Callable[[Path], None]) -> None:
    """Write OUT: `fill(staging)` writes every file of `OUT_FILES` but
    plan.json and the marker (and any of `OUT_FOLDERS`); then `plan` is
    signed and written, and the staging directory replaces OUT."""
    from fusec.runtime.user_key import load_key

    target = through_link(Path(out_dir))  # a link to OUT: replace what it points to
    check_replaceable(target)
    key = load_key(create=True)
    assert key is not None
    with stop_cleanly():
        try:
            staging = make_staging_dir(target, {*OUT_FILES, *OUT_FOLDERS})
        except OSError as err:
            raise FusecError(f"cannot write '{out_dir}': {err.strerror}") from None
        _fill_staging(staging, target, out_dir, plan, fill, key)


def _fill_staging(staging: Path, target: Path, out_dir: str | Path, plan: dict[str, Any],
                  fill: Callable[[Path], None], key: bytes) -> None:
    """Fill `staging` and move it to `target`; `staging` is gone after."""
    from fusec.runtime.out_signature import sign_plan

    try:
        fill(staging)
        # Last: the signature covers the files written above.
        (staging / "plan.json").write_text(
            json.dumps(sign_plan(plan, staging, key), indent=1) + "\n", encoding="utf-8")
        written = [n for n in OUT_FILES if n != MARKER]
        write_marker(staging, written, [d for d in OUT_FOLDERS if (staging / d).is_dir()])
        replace_directory(staging, target)
    except OSError as err:
        raise FusecError(f"cannot write '{out_dir}': {err.strerror or err}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
