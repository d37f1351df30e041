"""User-facing errors: `file:line:col: error: message`, a source line and a caret.

Every error a user can cause (bad syntax, a verifier rule, a missing file, an
unknown pass) is a `FusecError`. The driver prints it and exits with code 1;
anything else is a bug in fusec and is reported as an internal error.
"""

from __future__ import annotations

import sys
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # xDSL is imported where a location is made or read, not to raise an error
    from xdsl.dialects.builtin import FileLineColLoc
    from xdsl.ir import Operation
    from xdsl.utils.exceptions import ParseError


@dataclass(frozen=True)
class SourceLoc:
    """A position in a source file; lines and columns count from 1."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def to_attr(self) -> FileLineColLoc:
        """As an xDSL location attribute, to attach to an op."""
        from xdsl.dialects.builtin import FileLineColLoc, IntAttr, StringAttr

        return FileLineColLoc(StringAttr(self.file), IntAttr(self.line), IntAttr(self.col))


class FusecError(Exception):
    """An error in the user's input, with the place it was found (if any)."""

    def __init__(self, message: str, loc: SourceLoc | None = None, context: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.context = context

    def render(self, sources: dict[str, str] | None = None) -> str:
        """`file:line:col: error: message`, then the source line and a caret."""
        message = escape_controls(self.message)
        head = f"{self.loc}: error: {message}" if self.loc else f"error: {message}"
        context = self.context or _source_context(self.loc, sources or {})
        context = "\n".join(escape_controls(line) for line in context.split("\n"))
        return head + ("\n" + context if context else "")


class InternalError(Exception):
    """A bug in fusec found where it shows (a generated kernel numba cannot
    compile), with a message that says so: the driver prints
    `fusec: internal error: <message>` and exits 1, without a traceback."""


def counted(n: int, noun: str, plural: str = "") -> str:
    """`1 launch`, `2 launches`: `n` and `noun`, plural (`plural`, else
    `noun` + "s") unless `n` is 1; for counts in reports and summary lines."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


# Bidirectional overrides and isolates: they reorder what a terminal shows.
_BIDI_CONTROLS = frozenset(chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A)))


def escape_controls(text: str) -> str:
    """`text` safe for a terminal: control characters (a newline or an escape
    sequence in a function name, say) written as Python escapes (`\\n`, `\\x1b`)."""
    if text.isprintable():
        return text
    return "".join(
        c.encode("unicode_escape").decode("ascii")
        if unicodedata.category(c) in ("Cc", "Zl", "Zp") or c in _BIDI_CONTROLS else c
        for c in text)


def warn(message: str) -> None:
    """One `fusec: warning: ...` line on stderr (the caller escapes what it
    quotes)."""
    print(f"fusec: warning: {message}", file=sys.stderr)


def loc_of(op: Operation) -> SourceLoc | None:
    """The source location the parser attached to `op`, if any."""
    from xdsl.dialects.builtin import FileLineColLoc

    loc = op.location
    if isinstance(loc, FileLineColLoc):
        return SourceLoc(loc.filename.data, loc.line.data, loc.column.data)
    return None


def op_error(op: Operation, message: str) -> FusecError:
    """An error located at `op` (or at its closest located ancestor)."""
    cur: Operation | None = op
    while cur is not None:
        if (loc := loc_of(cur)) is not None:
            return FusecError(message, loc)
        cur = cur.parent_op()
    return FusecError(message)


def from_parse_error(err: ParseError) -> FusecError:
    """Turn xDSL's parse error into a located `FusecError` with a caret line."""
    where = err.span.get_location()
    message = err.msg.strip()
    text = err.span.input.content
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    # xDSL's lexer leaves this placeholder unfilled; the span starts at the sigil.
    message = message.replace("{first_char}", repr(text[err.span.start : err.span.start + 1]))
    line_start = text.rfind("\n", 0, err.span.start) + 1
    line_end = text.find("\n", err.span.start)
    line = text[line_start : line_end if line_end >= 0 else len(text)]
    width = max(1, min(err.span.end, line_start + len(line)) - err.span.start)
    caret = " " * (err.span.start - line_start) + "^" * width
    return FusecError(
        message, SourceLoc(where.file, where.line, where.col), f"{line}\n{caret}"
    )


def _source_context(loc: SourceLoc | None, sources: dict[str, str]) -> str:
    if loc is None or loc.file not in sources:
        return ""
    lines = sources[loc.file].split("\n")
    if not 1 <= loc.line <= len(lines):
        return ""
    return lines[loc.line - 1] + "\n" + " " * (loc.col - 1) + "^"
