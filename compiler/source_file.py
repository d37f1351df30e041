"""Reading a model's text: a file, or stdin for `-`, as UTF-8 (or a clear
error). Nothing here imports xDSL: the command line reads the text to look
its compile up in the program cache before it loads the compiler.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fusec.analysis.diagnostics import FusecError, SourceLoc


def read_source(path: str) -> str:
    """The text of `path` (or stdin for `-`), as UTF-8, or a clear error."""
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        p = Path(path)
        if not p.exists():
            raise FusecError(f"cannot read '{path}': no such file")
        if p.is_dir():
            raise FusecError(f"cannot read '{path}': it is a directory")
        try:
            data = p.read_bytes()
        except OSError as err:
            raise FusecError(f"cannot read '{path}': {err.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        before = data[: err.start]
        line = before.count(b"\n") + 1
        col = err.start - (before.rfind(b"\n") + 1) + 1
        raise FusecError(
            f"the file is not valid UTF-8 (byte 0x{data[err.start]:02x})",
            SourceLoc(path, line, col),
        ) from None
    text = text.removeprefix("\ufeff")  # a UTF-8 byte order mark, as some editors write
    if not text.strip():
        raise FusecError(f"'{path}' is empty: expected an MLIR module of func.func functions")
    return text


def source_text(source: str | Path) -> tuple[str, str]:
    """(text, name for messages): a Path or a one-line string naming a file is
    read; anything else is the model's text."""
    if isinstance(source, Path) or ("\n" not in source and "{" not in source):
        return read_source(str(source)), "<stdin>" if str(source) == "-" else str(source)
    return source.removeprefix("\ufeff"), "<model>"
