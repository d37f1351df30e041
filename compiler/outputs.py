"""Writing results whole or not at all: into a temporary sibling, then renamed."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from fusec.compiler.diagnostics import FusecError


def write_text_atomically(path: str, text: str) -> None:
    """Write `text` to `path` so that a failure leaves no partial file."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise FusecError(f"cannot write '{path}': it is a directory")
    if not parent.is_dir():
        raise FusecError(f"cannot write '{path}': the directory '{parent}' does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=parent)
    except OSError as err:
        raise FusecError(f"cannot write '{path}': {err.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, target)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise FusecError(f"cannot write '{path}': {err.strerror}") from None


def replace_directory(staging: Path, target: Path) -> None:
    """Move a fully written `staging` directory to `target`, replacing an
    older output directory there."""
    backup: Path | None = None
    if target.exists():
        if not target.is_dir():
            raise FusecError(f"cannot write '{target}': a file of that name exists")
        backup = target.with_name(f".{target.name}.old")
        shutil.rmtree(backup, ignore_errors=True)
        os.replace(target, backup)
    try:
        os.replace(staging, target)
    except OSError as err:
        if backup is not None:
            os.replace(backup, target)
        raise FusecError(f"cannot write '{target}': {err.strerror}") from None
    if backup is not None:
        shutil.rmtree(backup, ignore_errors=True)
