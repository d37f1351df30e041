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
  the result. One that cannot be parsed, or that was written for another key
  (foreign), is ignored with a warning on stderr; the group is timed again
  and its `store` replaces the entry.
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
import sys
import tempfile
from pathlib import Path
from typing import Any

ENTRY_FORMAT = "fusec-tuning"
ENTRY_VERSION = 1
TUNING_DIR_ENV = "FUSEC_TUNING_CACHE"


def tuning_key(device: str, target: str, fingerprint: str) -> str:
    """The cache key of one group tuned on `device` for `target`."""
    text = json.dumps([device, target, fingerprint])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _warn(message: str) -> None:
    print(f"fusec: warning: {message}", file=sys.stderr)


class TuningCache:
    """The tuning entries under `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._write_failed = False

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
        corrupt or foreign (with a warning)."""
        path = self.path(key)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as err:
            _warn(f"cannot read the tuning cache entry '{path}' ({err.strerror}); "
                  "timing the group again")
            return None
        try:
            entry = json.loads(text)
        except ValueError:
            entry = None
        if not isinstance(entry, dict) or entry.get("format") != ENTRY_FORMAT \
                or entry.get("version") != ENTRY_VERSION or entry.get("key") != key \
                or not isinstance(entry.get("result"), dict):
            _warn(f"ignoring the tuning cache entry '{path}' (corrupt, or written for "
                  "another group); timing the group again")
            return None
        return entry["result"]

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
                _warn(f"cannot write the tuning cache under '{self.root}' "
                      f"({err.strerror or err}); groups will be timed again next time")
                self._write_failed = True
