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

from fusec.analysis.diagnostics import FusecError

MARKER = "fusec-out.json"
MARKER_FORMAT = "fusec-out"
MARKER_VERSION = 1

_MAX_MARKER_BYTES = 64 * 1024  # a real marker is a few hundred bytes


def write_marker(out: Path, files: list[str], folders: list[str] | None = None) -> None:
    """Write the marker into `out`, listing `files` and `folders` (names inside
    `out`; a folder holds only folders and regular files fusec wrote, such as
    the kept kernels of `--save-kernels`)."""
    data: dict[str, Any] = {"format": MARKER_FORMAT, "version": MARKER_VERSION,
                            "files": sorted(files)}
    if folders:
        data["folders"] = sorted(folders)
    (out / MARKER).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def read_manifest(out: Path) -> list[str] | None:
    """The files the marker of `out` lists, or None when it has no valid marker."""
    data = _read_marker(out)
    return None if data is None else data[0]


def _read_marker(out: Path) -> tuple[list[str], list[str]] | None:
    """(files, folders) the marker of `out` lists, or None when it has no valid marker."""
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
    files, folders = data.get("files"), data.get("folders", [])
    if not isinstance(files, list) or not all(_plain_name(f) for f in files):
        return None
    if not isinstance(folders, list) or not all(_plain_name(f) for f in folders):
        return None
    return [str(f) for f in files], [str(f) for f in folders]


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
    marker = _read_marker(out)
    if marker is None:
        return None
    allowed = set(marker[0]) | {MARKER}
    foreign: list[str] = []
    for entry in sorted(out.iterdir()):
        if entry.name in marker[1] and _plain_tree(entry):
            continue
        # A folder or link under a file's name is not what fusec wrote either.
        if entry.name not in allowed or not stat.S_ISREG(entry.lstat().st_mode):
            foreign.append(entry.name)
    return foreign


def _plain_tree(folder: Path) -> bool:
    """Whether `folder` is a real directory holding only real directories and
    regular files (no links, devices or sockets), all the way down."""
    if not stat.S_ISDIR(folder.lstat().st_mode):
        return False
    for entry in folder.iterdir():
        mode = entry.lstat().st_mode
        if not (stat.S_ISREG(mode) or (stat.S_ISDIR(mode) and _plain_tree(entry))):
            return False
    return True


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
