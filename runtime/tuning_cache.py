"""Autotuning results kept across compiles: one JSON file per tuned group.

```python
cache = TuningCache.user()           # ~/.cache/fusec/tuning, or None (--no-tuning-cache)
key = tuning_key("NVIDIA H200 (cc 9.0)", "h200", fingerprint)
entry = cache.load(key)              # dict, or None when absent, corrupt or foreign
cache.store(key, {"schedule": "...", "candidates": [...]})  # atomic: temporary file renamed
```

- The key is a SHA-256 over the device (name and compute capability), the
  target name and the group's fingerprint (`compiler/autotune.py`: its
  printed body with value names normalised, which carries its shapes and
  dtypes, the candidate count and the fusec version).
- An entry is `KEY[:2]/KEY.json` holding the format, version and key beside
  the result. One that is not UTF-8 JSON, or that was written for another key
  (foreign), is ignored with a one-line warning on stderr naming it and why
  (`fusec: warning: ignoring the tuning cache entry '...' (...)`); the group
  is timed again and its `store` replaces the entry. A result that loads is
  still checked by its reader before use (`compiler/tuning_entry.py`: every
  schedule in it must be one the scheduler offers the group).
- Writers never leave a partial file: a temporary file in the entry's folder
  renamed over the entry (`os.replace`), so concurrent writers race
  harmlessly and a reader sees no entry or a whole one.
- The folder is `$FUSEC_TUNING_CACHE`, else `tuning/` in the per-user cache
  folder the kernel cache uses (`$FUSEC_CACHE_DIR`, else platformdirs' user
  cache folder for "fusec").
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from fusec.analysis.diagnostics import warn

ENTRY_FORMAT = "fusec-tuning"
ENTRY_VERSION = 1
TUNING_DIR_ENV = "FUSEC_TUNING_CACHE"


def tuning_key(device: str, target: str, fingerprint: str) -> str:
    """The cache key of one group tuned on `device` for `target`."""
    text = json.dumps([device, target, fingerprint])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()



def _parse(raw: bytes) -> tuple[Any, str | None]:
    """The JSON value of an entry's bytes, or why there is none."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return None, f"not UTF-8 text: byte {err.start}"
    try:
        return json.loads(text), None
    except ValueError as err:  # json.JSONDecodeError, or an integer too long to read
        return None, f"not JSON: {err}"
    except RecursionError:
        return None, "not JSON: nested too deeply"


def _foreign(entry: Any, key: str) -> str | None:
    """Why `entry` is not a fusec tuning entry for `key`, or None."""
    if not isinstance(entry, dict):
        return f"a JSON {type(entry).__name__}, not an entry object"
    if entry.get("format") != ENTRY_FORMAT or entry.get("version") != ENTRY_VERSION:
        return f"not a {ENTRY_FORMAT} entry of version {ENTRY_VERSION}"
    if entry.get("key") != key:
        return "written for another group"
    if not isinstance(entry.get("result"), dict):
        return "no result object"
    return None


class TuningCache:
    """The tuning entries under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._write_failed = False
        self._warned: set[str] = set()

    @staticmethod
    def user() -> TuningCache:
        """The per-user tuning cache (module docstring)."""
        folder = os.environ.get(TUNING_DIR_ENV)
        if folder:
            return TuningCache(Path(folder))
        from fusec.runtime.kernel_cache import user_cache_root

        return TuningCache(user_cache_root() / "tuning")

    def path(self, key: str) -> Path:
        """Where the entry of `key` lives."""
        return self.root / key[:2] / f"{key}.json"

    def load(self, key: str) -> dict[str, Any] | None:
        """The result stored under `key`; None when there is none, or it is
        corrupt or foreign (with a warning). Whether the result is usable
        for the group is its reader's check (`compiler/tuning_entry.py`)."""
        path = self.path(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as err:
            self.warn_ignored(key, f"cannot read it: {err.strerror}", "timing the group again")
            return None
        entry, why = _parse(raw)
        if why is None:
            why = _foreign(entry, key)
        if why is not None:
            self.warn_ignored(key, why, "timing the group again")
            return None
        return entry["result"]

    def warn_ignored(self, key: str, why: str, then: str) -> None:
        """`fusec: warning: ignoring the tuning cache entry 'PATH' (WHY); THEN`,
        on one line, once per entry: the entry is not used, and `store` replaces it."""
        if key in self._warned:  # groups of one fingerprint share an entry: say it once
            return
        self._warned.add(key)
        warn(f"ignoring the tuning cache entry '{self.path(key)}' ({' '.join(why.split())}); "
              f"{then}")

    def store(self, key: str, result: dict[str, Any]) -> None:
        """Write the entry of `key` whole; a folder that cannot be written is
        reported once and skipped."""
        path = self.path(key)
        entry = {"format": ENTRY_FORMAT, "version": ENTRY_VERSION, "key": key, "result": result}
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(entry, f, indent=1)
            os.replace(tmp, path)
        except OSError as err:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            if not self._write_failed:
                warn(f"cannot write the tuning cache under '{self.root}' "
                      f"({err.strerror or err}); groups will be timed again next time")
                self._write_failed = True
