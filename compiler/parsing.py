"""Reading and parsing `nn` programs, with a source location on every op.

xDSL's parser reports line:col for syntax errors but leaves parsed ops without
locations, so verifier errors could not point at the source. `LocatingParser`
attaches `loc("file":line:col)` to each op as it is parsed; passes keep it when
they rewrite (see `compiler.rewriting.copy_location`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp, UnknownLoc
from xdsl.dialects.func import Func
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError, VerifyException

from fusec.compiler.diagnostics import FusecError, SourceLoc, from_parse_error

SPLIT_MARKER = "// -----"


def make_context() -> Context:
    """A context with exactly the dialects fusec programs use.

    The `nn` and `fusion` dialects are loaded here directly, not through the
    `xdsl.universe` entry point (which exists for stock `xdsl-opt`), so they
    are registered once.
    """
    from fusec.dialects.fusion import Fusion
    from fusec.dialects.nn import NN

    ctx = Context()
    for dialect in (Builtin, Func, NN, Fusion):
        ctx.load_dialect(dialect)
    return ctx


class LocatingParser(Parser):
    """A parser that records `file:line:col` on every op it builds."""

    def parse_operation(self) -> Operation:
        start = self._current_token.span  # pyright: ignore[reportPrivateUsage]
        op = super().parse_operation()
        if isinstance(op.location, UnknownLoc):
            where = start.get_location()
            op.location = SourceLoc(where.file, where.line, where.col).to_attr()
        return op


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
    if not text.strip():
        raise FusecError(f"'{path}' is empty: expected an MLIR module of func.func functions")
    return text


def split_input(text: str) -> list[str]:
    """Chunks between `// -----` lines, each padded with blank lines so that
    its line numbers stay those of the whole file."""
    chunks: list[str] = []
    current: list[str] = []
    offset = 0
    for number, line in enumerate(text.split("\n")):
        if line.strip() == SPLIT_MARKER:
            chunks.append("\n" * offset + "\n".join(current))
            current, offset = [], number + 1
        else:
            current.append(line)
    chunks.append("\n" * offset + "\n".join(current))
    return chunks


def parse_module(ctx: Context, text: str, filename: str) -> ModuleOp:
    """Parse one module; syntax errors become located `FusecError`s."""
    try:
        return LocatingParser(ctx, text, filename).parse_module()
    except ParseError as err:
        raise from_parse_error(err) from None
    except VerifyException as err:
        # Raised by attribute constructors while parsing (e.g. a dense literal
        # with the wrong number of elements); it carries no position.
        raise FusecError(str(err).strip(), SourceLoc(filename, 1, 1)) from None
