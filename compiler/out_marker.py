"""The marker that makes a directory an OUT fusec may replace.

`fusec MODEL -o OUT` replaces an existing OUT only when fusec wrote it: OUT
holds `fusec-out.json`, naming the format, its version and the files fusec
wrote (the manifest), and nothing else. A directory without a valid marker,
or with any file, folder or link that is not in the manifest, is refused and
left untouched, so that a mistyped `-o` never deletes someone's work.

```json
{"format": "fusec-out", "version": 1,
 "files": ["constants.npz", "kernels.py", "model.mlir", "plan.json", "report.md"]}
```
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from fusec.compiler.diagnostics import FusecError

MARKER = "fusec-out.json"
MARKER_FORMAT = "fusec-out"
MARKER_VERSION = 1

_MAX_MARKER_BYTES = 64 * 1024  # a real marker is a few hundred bytes


def write_marker(out: Path, files: list[str]) -> None:
    """Write the marker into `out`, listing `files` (names inside `out`)."""
    data = {"format": MARKER_FORMAT, "version": MARKER_VERSION, "files": sorted(files)}
    (out / MARKER).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def read_manifest(out: Path) -> list[str] | None:
    """The files the marker of `out` lists, or None when it has no valid marker."""
    path = out / MARKER
    try:
        if not stat.S_ISREG(path.lstat().st_mode) or path.lstat().st_size > _MAX_MARKER_BYTES:
            return None
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("format") != MARKER_FORMAT \
            or data.get("version") != MARKER_VERSION:
        return None
    files = data.get("files")
    if not isinstance(files, list) or not all(_plain_name(f) for f in files):
        return None
    return [str(f) for f in files]


def _plain_name(name: object) -> bool:
    """A file name directly inside OUT: no separator, not `.`/`..`, not the marker."""
    return isinstance(name, str) and name not in ("", ".", "..", MARKER) \
        and "/" not in name and "\\" not in name and "\0" not in name


def is_fusec_out(out: Path) -> bool:
    """Whether `out` is a directory fusec wrote and may replace: a valid
    marker, and only regular files it lists."""
    return _foreign_entries(out) == []


def _foreign_entries(out: Path) -> list[str] | None:
    """Entries of `out` fusec did not write (None: no valid marker)."""
    manifest = read_manifest(out)
    if manifest is None:
        return None
    allowed = set(manifest) | {MARKER}
    foreign: list[str] = []
    for entry in sorted(out.iterdir()):
        # A folder or link under a manifest name is not what fusec wrote either.
        if entry.name not in allowed or not stat.S_ISREG(entry.lstat().st_mode):
            foreign.append(entry.name)
    return foreign


def check_replaceable(target: Path) -> None:
    """Raise unless `target` may be replaced by a new OUT: it does not exist,
    is an empty directory, or is an OUT fusec wrote (`is_fusec_out`)."""
    if not target.exists():
        return
    if not target.is_dir():
        raise FusecError(f"cannot write '{target}': a file of that name exists")
    try:
        if not any(target.iterdir()):
            return
        foreign = _foreign_entries(target)
    except OSError as err:
        raise FusecError(f"cannot write '{target}': {err.strerror}") from None
    if foreign is None:
        raise FusecError(
            f"'{target}' exists and is not a fusec output directory (it has no valid "
            f"{MARKER}); refusing to replace it: remove it or choose another -o")
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise FusecError(
            f"'{target}' holds files fusec did not write ({shown}); refusing to replace "
            "it: remove them or choose another -o")
