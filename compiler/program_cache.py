"""Compiled programs kept across processes, for `fusec.compile` and the
command line's compile job (`compiler/cli_cache.py`, which writes OUT from
an entry's files, `ProgramStore.load_files`, without reading a program).

A model compiled once (the same text, the same options, the same target and
the same fusec source) is not compiled again in a later process: the compile
writes its OUT into the per-user cache, and the next `fusec.compile` of it
reads that OUT back (`runtime/compiled_model.read_out`), as `fusec.load_out`
does. A `torch.compile(backend="fusec")` first call in a new process then
skips the front end, and runs the very program the first process ran (the
register probe's time budget cannot make it choose differently).

```python
store = ProgramStore.user()                  # None when FUSEC_PROGRAM_CACHE=0
key = program_key(text, {"fusion": True}, target, "gpu")
hit = store.load(key)                        # (program, memory, plan, kernels.py) or None
store.store(key, artifacts)                  # after a compile
```

- The folder is `programs/` in the per-user cache folder of the kernel cache
  (`$FUSEC_CACHE_DIR`, else platformdirs' user cache folder for "fusec");
  an entry is `KEY[:2]/KEY`, an OUT like any other, signed with the user's
  key (`runtime/out_signature.py`) and naming its key in plan.json
  (`program_key`) and the sha256 of the files its signature does not cover
  (`program_files`: model.mlir, report.md). Removing the folder clears it.
- The key is a SHA-256 over the program text, the compile options, every
  fact of the target profile, the device kind, the numba, numba-cuda and
  xdsl versions and a digest of fusec's own source files, so an edited fusec
  never reads an entry an earlier one wrote.
- An entry that is missing is a miss; one that is damaged, unsigned, signed
  by another key or filed under another key is a miss with one warning line
  (`fusec: warning: ignoring the compiled program '...' (...)`), compiled
  again and replaced. Writing is atomic (a staging folder renamed), so
  processes racing on one entry leave a whole one.
- At most `MAX_ENTRIES` entries are kept: storing one more removes the least
  recently used (a read marks its entry used).
- Not kept: a compile whose folded constants exceed `MAX_ENTRY_CONSTANT_BYTES`
  (the cache holds programs, not weights), and what the caller compiles with
  the cache off (`fusec.compile(..., cache=False)`, autotuning, remarks; for
  the command line, `cli_cache.off_reason`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import shutil
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fusec.analysis.diagnostics import FusecError, escape_controls, warn
from fusec.analysis.env_switch import switched_off
from fusec.analysis.targets import Target
from fusec.codegen.kernel_cache import toolchain_versions, user_cache_root
from fusec.runtime.out_signature import sha256_hex

if TYPE_CHECKING:
    from fusec.analysis.memory_plan import MemoryPlan
    from fusec.analysis.program import Program
    from fusec.compiler.compile import CompiledArtifacts

PROGRAM_CACHE_ENV = "FUSEC_PROGRAM_CACHE"
ENTRY_FORMAT = "fusec-program"
ENTRY_VERSION = 1
KEY_FIELD = "program_key"
"""plan.json's field naming the key an entry was stored under."""
FILES_FIELD = "program_files"
"""plan.json's field giving the sha256 of the entry's files the signature
does not cover (model.mlir, report.md), so that a damaged one is a miss."""
COPIED_FILES = ("model.mlir", "kernels.py", "report.md", "constants.npz")
"""The files of an entry an OUT written from it copies (plan.json is signed anew)."""
_UNSIGNED_FILES = ("model.mlir", "report.md")
MAX_ENTRY_CONSTANT_BYTES = 64 * 1024 * 1024
"""Folded constants past this are not kept: the entry would copy weights."""
MAX_ENTRIES = 256
"""Entries kept; storing one more removes the least recently used."""
# The folders of fusec's source whose files the digest covers (the package
# as installed; tests, benches and docs change no compile).
_SOURCE_PACKAGES = ("analysis", "codegen", "compiler", "dialects", "importers", "passes",
                    "reference", "runtime", "scheduling")

Hit = tuple["Program", dict[str, "MemoryPlan"], dict[str, Any], Path]


@dataclasses.dataclass(frozen=True)
class EntryFiles:
    """An entry as it is on disk, checked: plan.json (with the cache's own
    fields) and the bytes of `COPIED_FILES`."""

    folder: Path
    plan: dict[str, Any]
    files: dict[str, bytes]


@functools.cache
def source_digest() -> str:
    """A SHA-256 over fusec's own source files (paths and contents), read
    once per process."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    files = sorted(root.glob("*.py")) + sorted(
        p for package in _SOURCE_PACKAGES for p in (root / package).rglob("*.py"))
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@functools.cache
def _xdsl_version() -> str:
    try:
        return metadata.version("xdsl")
    except metadata.PackageNotFoundError:
        return "none"


def program_key(text: str, options: dict[str, Any], target: Target, device: str) -> str:
    """The cache key of `text` compiled with `options` (JSON values) for
    `target` and run on `device` ("gpu", "sim", "cpu")."""
    payload = {
        "format": ENTRY_FORMAT,
        "version": ENTRY_VERSION,
        "text": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "options": options,
        "target": dataclasses.asdict(target),
        "device": device,
        **toolchain_versions(),  # numba, numba-cuda and fusec's version
        "xdsl": _xdsl_version(),
        "fusec_source": source_digest(),
    }
    encoded = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(encoded.encode("utf-8")).hexdigest()



class ProgramStore:
    """A folder of compiled programs, one OUT per key."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @staticmethod
    def user() -> ProgramStore | None:
        """The per-user store, or None when `FUSEC_PROGRAM_CACHE=0`."""
        if switched_off(PROGRAM_CACHE_ENV):
            return None
        return ProgramStore(user_cache_root() / "programs")

    def entry(self, key: str) -> Path:
        """The folder of `key`'s entry."""
        return self.root / key[:2] / key

    def load(self, key: str) -> Hit | None:
        """The program stored under `key`, its memory plans, plan.json and
        kernels.py's path; None when there is none or it cannot be used."""
        from fusec.runtime.compiled_model import read_out

        folder = self.entry(key)
        if not (folder / "plan.json").is_file():
            return None
        try:
            program, memory, plan = read_out(folder)
        except FusecError as err:
            _ignore(folder, str(err))
            return None
        if plan.get(KEY_FIELD) != key:
            _ignore(folder, "stored under another key")
            return None
        _touch(folder)
        return program, memory, plan, folder / "kernels.py"

    def load_files(self, key: str) -> EntryFiles | None:
        """The files of `key`'s entry, for an OUT written from it (the
        command line's compile job); None when there is none or it cannot be
        used. They are checked as `fusec run` checks an OUT (this user's
        signature over plan.json, kernels.py and the constants, and the
        digests plan.json keeps of the other files), but not read into a
        program: nothing here imports the compiler."""
        folder = self.entry(key)
        if not (folder / "plan.json").is_file():
            return None
        try:
            found = _read_entry(folder)
        except FusecError as err:
            _ignore(folder, str(err))
            return None
        if found.plan.get(KEY_FIELD) != key:
            _ignore(folder, "stored under another key")
            return None
        _touch(folder)
        return found

    def store(self, key: str, artifacts: CompiledArtifacts) -> None:
        """Keep `artifacts` under `key` (nothing when its constants are too
        large; a folder that cannot be written is said once, not an error)."""
        from fusec.compiler.compile import write_out

        if sum(int(a.nbytes) for a in artifacts.constants.values()) > MAX_ENTRY_CONSTANT_BYTES:
            return
        folder = self.entry(key)
        unsigned = {"model.mlir": artifacts.model_mlir, "report.md": artifacts.report_md}
        digests = {name: sha256_hex(text.encode("utf-8")) for name, text in unsigned.items()}
        stored = dataclasses.replace(
            artifacts, plan={**artifacts.plan, KEY_FIELD: key, FILES_FIELD: digests})
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            write_out(stored, folder)
        except (OSError, FusecError) as err:
            warn(escape_controls(f"cannot keep the compiled program in '{folder}' ({err})"))
            return
        self.evict(MAX_ENTRIES)

    def evict(self, keep: int) -> None:
        """Remove all but the `keep` most recently used entries (a reader
        touches its entry). One a reader holds open at that moment is read
        whole or refused as damaged, then compiled again."""
        entries = [p.parent for p in self.root.glob("*/*/plan.json")]
        if len(entries) <= keep:
            return
        entries.sort(key=_last_used, reverse=True)
        for folder in entries[keep:]:
            shutil.rmtree(folder, ignore_errors=True)


def _ignore(folder: Path, why: str) -> None:
    warn(escape_controls(f"ignoring the compiled program '{folder}' ({why}); compiling again"))


def _read_entry(folder: Path) -> EntryFiles:
    """The checked files of the entry `folder` (a `FusecError` says what is wrong)."""
    from fusec.runtime.out_dir import check_written_by_user, read_out_file

    try:
        plan = json.loads(read_out_file(folder, "plan.json").decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise FusecError(f"plan.json is corrupt: {type(err).__name__}") from None
    if not isinstance(plan, dict):
        raise FusecError("plan.json is corrupt (not a JSON object)")
    names = (plan.get("kernels"), plan.get("constants_file"))
    digests = plan.get(FILES_FIELD)
    if names != ("kernels.py", "constants.npz") or not isinstance(digests, dict) \
            or not isinstance(plan.get("kernels_sha256"), str):
        raise FusecError("plan.json does not describe a stored program")
    files = {name: read_out_file(folder, name) for name in COPIED_FILES}
    check_written_by_user(folder, plan, files["kernels.py"], files["constants.npz"])
    for name in _UNSIGNED_FILES:  # covered by the signature through the digests
        if digests.get(name) != sha256_hex(files[name]):
            raise FusecError(f"{name} does not match its digest in plan.json")
    return EntryFiles(folder, plan, files)


def _last_used(folder: Path) -> float:
    try:
        return (folder / "plan.json").stat().st_mtime
    except OSError:
        return 0.0


def _touch(folder: Path) -> None:
    """Mark `folder` used now (its plan.json's time; the content, and so the
    signature, stay as they are)."""
    with contextlib.suppress(OSError):
        os.utime(folder / "plan.json")
