"""Writing results whole or not at all: into a temporary sibling, then renamed.

What users see is what a plain write would give them: files and OUT get the
permissions the umask allows (temporary files start private), a symbolic link
given as the output is written through to the file or directory it points to
(the link stays), and SIGTERM, SIGHUP or Ctrl-C while writing leave no
temporary file behind; temporary folders of an earlier fusec that was killed
outright are removed by the next write of the same OUT.

An output is never one of the command's inputs (`refuse_input_as_output`):
`fusec m.mlir -o m.mlir` is refused, as gcc refuses `gcc -o x.c x.c`, and so
is the same file through a symbolic or hard link, or an OUT directory that
holds an input (replacing OUT would delete it).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import IO, Any

from fusec.analysis.diagnostics import FusecError

TEMP_TAG = "fusec-tmp"  # `.OUT.fusec-tmp-PID-XXXX`: OUT being written by process PID
OLD_TAG = "fusec-old"  # `.OUT.fusec-old-PID`: the OUT being replaced by process PID
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # SIGINT unwinds as KeyboardInterrupt


def umask_mode(base: int) -> int:
    """`base` (0o666 for files, 0o777 for directories) less the umask."""
    mask = os.umask(0)
    os.umask(mask)
    return base & ~mask


def through_link(path: Path) -> Path:
    """Where a write to `path` goes: a symbolic link is written through to
    what it points to, as `echo > link` would."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def refuse_input_as_output(output: str | Path, inputs: Iterable[str | Path | None],
                           directory: bool = False) -> None:
    """Raise a `FusecError` when writing `output` would overwrite one of
    `inputs` (None and '-', stdin, are skipped): the same file by any name
    (symbolic or hard link), or, with `directory` (an OUT that replaces what
    is there), an input inside it."""
    out_id = _file_id(output)
    out_real = os.path.realpath(output)
    for given in inputs:
        if given is None or str(given) == "-":
            continue
        if out_id is not None and _file_id(given) == out_id:
            raise FusecError(f"input file '{given}' is the same as output file '{output}'")
        if directory and _inside(os.path.realpath(given), out_real):
            raise FusecError(f"input file '{given}' is inside the output directory "
                             f"'{output}', which writing it would replace; choose another -o")


def _file_id(path: str | Path) -> tuple[int, int] | None:
    """(device, inode) of what `path` names after links, or None if nothing is there."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _inside(path: str, folder: str) -> bool:
    """Whether real path `path` lies below real path `folder`."""
    try:
        return os.path.commonpath([path, folder]) == folder and path != folder
    except ValueError:  # one relative, one absolute, or different drives
        return False


class _Stopped(BaseException):
    """A stop signal, raised where the program was so that `finally` runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def stop_cleanly() -> Iterator[None]:
    """Inside: SIGTERM and SIGHUP unwind like an exception (so the caller's
    `finally` removes its temporary files), then act as they would have."""
    previous: dict[int, Any] = {}

    def handler(signum: int, frame: FrameType | None) -> None:
        raise _Stopped(signum)

    if threading.current_thread() is threading.main_thread():
        for sig in _STOP_SIGNALS:
            old = signal.getsignal(sig)
            if old not in (signal.SIG_IGN, None):  # an ignored signal stays ignored
                previous[sig] = old
                signal.signal(sig, handler)
    try:
        yield
    except _Stopped as stop:
        for sig, old in previous.items():
            signal.signal(sig, old)
        previous.clear()
        signal.raise_signal(stop.signum)  # the default action ends the process here
        raise FusecError(f"stopped by {signal.Signals(stop.signum).name}") from None
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def write_atomically(path: str, write: Callable[[IO[bytes]], None]) -> None:
    """Write a file through `write` so that a failure leaves no partial file."""
    target = through_link(Path(path))
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise FusecError(f"cannot write '{path}': it is a directory")
    if not parent.is_dir():
        raise FusecError(f"cannot write '{path}': the directory '{parent}' does not exist")
    with stop_cleanly():
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=parent)
        except OSError as err:
            raise FusecError(f"cannot write '{path}': {err.strerror}") from None
        try:
            os.fchmod(fd, umask_mode(0o666))  # mkstemp makes it 0600
            with os.fdopen(fd, "wb") as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())  # the data is on disk before the name points to it
            os.replace(tmp, target)
        except OSError as err:
            raise FusecError(f"cannot write '{path}': {err.strerror}") from None
        finally:
            Path(tmp).unlink(missing_ok=True)


def write_text_atomically(path: str, text: str) -> None:
    """Write `text` to `path` so that a failure leaves no partial file."""
    write_atomically(path, lambda f: f.write(text.encode("utf-8")))


def make_staging_dir(target: Path, names: set[str]) -> Path:
    """A temporary directory beside `target` to build it in, after removing
    the stale ones fusec left there (`names`: the files an OUT may hold)."""
    parent = target.parent if str(target.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    remove_stale(target, names)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.{TEMP_TAG}-{os.getpid()}-",
                                    dir=parent))
    staging.chmod(umask_mode(0o777))  # mkdtemp makes it 0700
    return staging


def remove_stale(target: Path, names: set[str]) -> None:
    """Remove temporary and backup folders of `target` that a fusec process
    no longer running left behind, holding only files named in `names`."""
    parent = target.parent if str(target.parent) else Path(".")
    pattern = re.compile(rf"\.{re.escape(target.name)}\.(?:{TEMP_TAG}|{OLD_TAG})-(\d+)(?:-\w+)?")
    for entry in parent.iterdir():
        m = pattern.fullmatch(entry.name)
        if m and not _running(int(m.group(1))) and _holds_only(entry, names):
            shutil.rmtree(entry, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # someone else's process, or not a pid: leave it
    return True


def _holds_only(folder: Path, names: set[str]) -> bool:
    """Whether `folder` is a real directory of regular files named in `names`."""
    try:
        if not stat.S_ISDIR(folder.lstat().st_mode):
            return False
        return all(e.name in names and stat.S_ISREG(e.lstat().st_mode)
                   for e in folder.iterdir())
    except OSError:
        return False


def replace_directory(staging: Path, target: Path) -> None:
    """Move a fully written `staging` directory to `target`, replacing an
    older output directory there; interrupted, the older one stays."""
    backup: Path | None = None
    if target.exists():
        if not target.is_dir():
            raise FusecError(f"cannot write '{target}': a file of that name exists")
        backup = target.with_name(f".{target.name}.{OLD_TAG}-{os.getpid()}")
        shutil.rmtree(backup, ignore_errors=True)
        os.replace(target, backup)
    try:
        os.replace(staging, target)
    except BaseException as err:  # KeyboardInterrupt too: put the old OUT back
        if backup is not None:
            os.replace(backup, target)
        if isinstance(err, OSError):
            raise FusecError(f"cannot write '{target}': {err.strerror}") from None
        raise
    if backup is not None:
        shutil.rmtree(backup, ignore_errors=True)
