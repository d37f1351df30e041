"""The per-user secret that signs the OUT folders this user's fusec writes.

`fusec MODEL -o OUT` records in plan.json an HMAC-SHA256 of what OUT runs,
keyed with this secret (`runtime/out_signature.py`); `fusec run OUT` and
`fusec.load_out` recompute it and run only an OUT that carries it. The key
never enters OUT, so someone who can edit a shared OUT cannot forge it.

- Where: `$FUSEC_CONFIG_DIR/out-key`, else `out-key` in platformdirs' user
  config folder for "fusec" (`~/.config/fusec/out-key` on Linux).
- What: 32 random bytes as 64 lowercase hex digits and a newline, mode 0600,
  in a folder created 0700, owned by the user.
- Made on first use (the first compile that writes an OUT): written whole to
  a temporary file beside it, then hard-linked to its name, which fails when
  the name exists, so two fusec processes starting at once agree on one key
  (the later one reads the earlier one's) and nobody sees a half-written key.
- A key that is unreadable, malformed, not the user's, or readable or
  writable by other users is an error naming the file; it is never skipped.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from pathlib import Path

from fusec.analysis.diagnostics import FusecError

CONFIG_DIR_ENV = "FUSEC_CONFIG_DIR"
KEY_NAME = "out-key"
KEY_BYTES = 32
_MAX_KEY_FILE = 1024  # a real key file is 65 bytes


def key_path() -> Path:
    """Where the key lives: `$FUSEC_CONFIG_DIR/out-key`, else the user's
    config folder for "fusec"."""
    folder = os.environ.get(CONFIG_DIR_ENV)
    if not folder:
        from platformdirs import user_config_dir

        folder = user_config_dir("fusec", appauthor=False)
    return Path(folder) / KEY_NAME


def load_key(create: bool) -> bytes | None:
    """The user's key; when there is none, a new one if `create`, else None.
    Raises a `FusecError` naming the file when it cannot be used."""
    path = key_path()
    key = _read_key(path)
    if key is None and create:
        _create_key(path)
        key = _read_key(path)
        if key is None:
            raise FusecError(f"cannot create the fusec key '{path}': it vanished after "
                             "being written")
    return key


def _fix_hint(path: Path) -> str:
    return (f"remove '{path}' and fusec makes a new one (OUT folders signed with the old "
            "key then need compiling again)")


def _read_key(path: Path) -> bytes | None:
    """The key in `path`, None when absent; an error when unusable."""
    try:
        fd = os.open(path, os.O_RDONLY)  # through a link: the file's owner and mode count
    except (FileNotFoundError, NotADirectoryError):  # no key; making one says why not
        return None
    except OSError as err:
        raise FusecError(f"cannot read the fusec key '{path}': {err.strerror} (its folder "
                         f"is set by {CONFIG_DIR_ENV})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FusecError(f"the fusec key '{path}' is not a regular file; {_fix_hint(path)}")
        _check_private(path, info)
        data = os.read(fd, _MAX_KEY_FILE)
    except OSError as err:
        raise FusecError(f"cannot read the fusec key '{path}': {err.strerror}") from None
    finally:
        os.close(fd)
    return _parse_key(path, data)


def _check_private(path: Path, info: os.stat_result) -> None:
    """Only the user may own, read and write the key: anyone else who can
    read it can sign an OUT in the user's name."""
    if not hasattr(os, "getuid"):
        return  # no POSIX owners and modes to check
    if info.st_uid != os.getuid():
        raise FusecError(f"the fusec key '{path}' belongs to another user; {_fix_hint(path)}")
    if info.st_mode & 0o077:
        raise FusecError(f"the fusec key '{path}' can be read or written by other users "
                         f"(mode {stat.S_IMODE(info.st_mode):04o}); run 'chmod 600 {path}' "
                         "if nobody else has seen it, else " + _fix_hint(path))


def _parse_key(path: Path, data: bytes) -> bytes:
    text = data.decode("ascii", errors="replace").strip()
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES or len(text) != 2 * KEY_BYTES:
        raise FusecError(f"the fusec key '{path}' is corrupt (expected {2 * KEY_BYTES} hex "
                         f"digits); {_fix_hint(path)}")
    return key


def _create_key(path: Path) -> None:
    """Write a new key to `path` unless another process got there first."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{KEY_NAME}.", dir=path.parent)  # mode 0600
    except OSError as err:
        raise FusecError(f"cannot create the fusec key '{path}': {err.strerror} (set "
                         f"{CONFIG_DIR_ENV} to a folder of yours that can be written)") from None
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(secrets.token_bytes(KEY_BYTES).hex() + "\n")
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):  # the first writer's key stays
            os.link(tmp, path)  # unlike a rename, fails where the key exists
    except OSError as err:
        raise FusecError(f"cannot create the fusec key '{path}': {err.strerror}") from None
    finally:
        Path(tmp).unlink(missing_ok=True)
