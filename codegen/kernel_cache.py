"""Compiled kernels kept across processes: one entry per distinct kernel,
holding its PTX, its cubin (machine code for the key's compute capability)
where ptxas built one, and ptxas's register and spill counts.

numba JIT-compiles every kernel in every new process (NVVM, then the driver
or ptxas: about a second or two each); an entry here lets any later compile
that meets the same kernel, in this process or another, skip all of it.

```python
unit = units_of_source(kernels_py, ["f_g0_add"])["f_g0_add"]   # codegen/kernel_unit.py
key = kernel_key(unit, [(1, "float32"), (1, "float32")], (9, 0))
store = user_store()                 # None when FUSEC_KERNEL_CACHE=0
code = store.load(key, "f_g0_add")   # KernelCode, or None when absent, corrupt or foreign
store.store(key, "f_g0_add", KernelCode(ptx, cubin, registers=30, spill_bytes=0))
```

- The key is a SHA-256 over the kernel's own normalised source (its
  `KernelUnit`: its body with comments dropped and its name replaced by one
  placeholder, after the prelude helpers it calls), its argument types, the
  `max_registers` it is declared with, the compute capability and the
  numba, numba-cuda and fusec versions. Kernels that differ only in their
  names (the 12 layers of a GPT-2 give 96 kernels of 8 bodies) share one
  key, so one build, in one program, across the partitions of a torch graph,
  across models and across processes; any change of what the code depends
  on misses instead of loading stale code.
- An entry is a JSON file `KEY[:2]/KEY.json` holding the key, the name of
  the kernel it was built for (for messages), the PTX and its SHA-256, the
  cubin (base64) and its SHA-256 or null, and the registers and spill bytes
  per thread ptxas reported (null without ptxas). A file that is not UTF-8
  JSON, whose digests do not match (truncated, corrupted), or that was
  written for another key (foreign) or by another format version is ignored
  with a one-line warning on stderr: the caller compiles the kernel again and
  its `store` replaces the entry.
- Writers never leave a partial file: each writes a temporary file in the
  entry's folder and renames it over the entry (`os.replace` is atomic on one
  file system), so concurrent writers of the same key race harmlessly and a
  reader sees either no entry or a whole one.
- The per-user folder is platformdirs' user cache folder for "fusec"
  (`~/.cache/fusec/kernels` on Linux), or `$FUSEC_CACHE_DIR/kernels`;
  `FUSEC_KERNEL_CACHE=0` turns the per-user cache off; deleting the folder
  clears it. `fusec MODEL -o OUT --save-kernels` writes the same entries into
  `OUT/kernels/`.

It lives in codegen/ (not the runtime) because the register probe
(`codegen/kernel_probe.py`) stores the kernels it compiles here too.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fusec.analysis.diagnostics import escape_controls, warn
from fusec.analysis.env_switch import switched_off

if TYPE_CHECKING:
    from fusec.codegen.kernel_unit import KernelUnit

ENTRY_FORMAT = "fusec-kernel"
ENTRY_VERSION = 3  # 2: the cubin beside the PTX; 3: keyed by the kernel, with counts
CACHE_DIR_ENV = "FUSEC_CACHE_DIR"
CACHE_SWITCH_ENV = "FUSEC_KERNEL_CACHE"

# Argument types of one kernel: [(ndim, numba element type name), ...]
# (codegen/ptx.py's Signature).
Signature = Sequence[Sequence[Any]]


@dataclass(frozen=True)
class KernelCode:
    """One compiled kernel: its PTX and, where ptxas or the driver built it,
    its cubin for the compute capability of its key; the registers and spill
    bytes (stores + loads) per thread ptxas reported, None without ptxas."""

    ptx: str
    cubin: bytes | None = None
    registers: int | None = None
    spill_bytes: int | None = None


_VERSIONS: dict[str, str] = {}


def toolchain_versions() -> dict[str, str]:
    """The versions that change the code numba generates (read once: a
    metadata lookup scans site-packages)."""
    if not _VERSIONS:
        for dist in ("numba", "numba-cuda", "fusec"):
            try:
                _VERSIONS[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                _VERSIONS[dist] = "none"
    return dict(_VERSIONS)


def kernel_key(unit: KernelUnit, signature: Signature, cc: Sequence[int]) -> str:
    """The cache key of the kernel `unit` compiled for `signature` and `cc`."""
    payload = {
        "format": ENTRY_FORMAT,
        "version": ENTRY_VERSION,
        "source": hashlib.sha256(unit.source.encode("utf-8")).hexdigest(),
        "entry": unit.name,
        "max_registers": int(unit.max_registers),
        "signature": [[int(n), str(t)] for n, t in signature],
        "cc": [int(c) for c in cc],
        **toolchain_versions(),
    }
    text = json.dumps(payload, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()



class KernelStore:
    """A folder of kernel entries (the per-user cache, or OUT/kernels)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._write_failed = False

    def path(self, key: str) -> Path:
        """Where the entry of `key` lives."""
        return self.root / key[:2] / f"{key}.json"

    def load(self, key: str, kernel: str) -> KernelCode | None:
        """The code stored for `key`, or None when there is no usable entry
        (a corrupt or foreign one is reported on stderr and left to be
        replaced by the next `store`)."""
        path = self.path(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as err:
            warn(f"cannot read kernel cache entry '{path}' ({err.strerror}); compiling "
                  f"'{escape_controls(kernel)}' again")
            return None
        problem, code = _check_entry(raw, key)
        if code is None:
            warn(f"ignoring kernel cache entry '{path}' ({problem}); compiling "
                  f"'{escape_controls(kernel)}' again")
        return code

    def store(self, key: str, kernel: str, code: KernelCode, strict: bool = False) -> None:
        """Write the entry of `key` whole (temporary file + rename); a
        folder that cannot be written is reported once and skipped (raised
        as `OSError` when `strict`)."""
        path = self.path(key)
        entry = {"format": ENTRY_FORMAT, "version": ENTRY_VERSION, "key": key,
                 "kernel": kernel, "toolchain": toolchain_versions(),
                 "ptx_sha256": _sha256(code.ptx.encode("utf-8")), "ptx": code.ptx,
                 "cubin_sha256": _sha256(code.cubin) if code.cubin else None,
                 "cubin": base64.b64encode(code.cubin).decode("ascii") if code.cubin else None,
                 "registers": code.registers, "spill_bytes": code.spill_bytes}
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(entry, f)
            os.replace(tmp, path)
        except OSError as err:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            if strict:
                raise
            if not self._write_failed:
                warn(f"cannot write the kernel cache under '{self.root}' "
                      f"({err.strerror or err}); kernels will be compiled again next time")
                self._write_failed = True


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _check_entry(raw: bytes, key: str) -> tuple[str, KernelCode | None]:
    """("", code) for a sound entry of `key`, else (what is wrong, None)."""
    try:
        entry = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return "not a readable JSON file: corrupted or truncated", None
    if not isinstance(entry, dict) or entry.get("format") != ENTRY_FORMAT:
        return "not a fusec kernel entry", None
    if entry.get("version") != ENTRY_VERSION:
        return f"entry version {entry.get('version')!r}, expected {ENTRY_VERSION}", None
    if entry.get("key") != key:
        return "written for another kernel (foreign entry)", None
    counts = [entry.get("registers"), entry.get("spill_bytes")]
    if not all(c is None or (isinstance(c, int) and c >= 0) for c in counts):
        return "its register counts are not counts: corrupted", None
    registers, spills = counts
    ptx = entry.get("ptx")
    if not isinstance(ptx, str) or _sha256(ptx.encode("utf-8")) != entry.get("ptx_sha256"):
        return "its PTX does not match its digest: corrupted", None
    cubin = entry.get("cubin")
    if cubin is None:
        return "", KernelCode(ptx, None, registers, spills)
    try:
        machine = base64.b64decode(cubin, validate=True) if isinstance(cubin, str) else b""
    except (binascii.Error, ValueError):
        machine = b""
    if not machine or _sha256(machine) != entry.get("cubin_sha256"):
        return "its cubin does not match its digest: corrupted", None
    return "", KernelCode(ptx, machine, registers, spills)


def user_store() -> KernelStore | None:
    """The per-user kernel cache, or None when `FUSEC_KERNEL_CACHE=0`."""
    if switched_off(CACHE_SWITCH_ENV):
        return None
    return KernelStore(user_cache_root() / "kernels")


def user_cache_root() -> Path:
    """fusec's per-user cache folder: `$FUSEC_CACHE_DIR`, else platformdirs'
    user cache folder for "fusec" (kernels and tuning results live below it)."""
    folder = os.environ.get(CACHE_DIR_ENV)
    if not folder:
        try:
            import platformdirs
        except ImportError:  # a declared dependency; a bare environment may still lack it
            base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
            folder = str(Path(base) / "fusec")
        else:
            folder = platformdirs.user_cache_dir("fusec", appauthor=False)
    return Path(folder)
