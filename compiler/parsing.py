"""Reading and parsing `nn` programs, with a source location on every op.

xDSL's parser reports line:col for syntax errors but leaves parsed ops without
locations, so verifier errors could not point at the source. `LocatingParser`
attaches `loc("file":line:col)` to each op as it is parsed; passes keep it when
they rewrite (see `compiler.rewriting.copy_location`).
"""

from __future__ import annotations

import bisect
import difflib
from collections.abc import Iterable

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp, UnknownLoc
from xdsl.dialects.func import Func
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue, TypeAttribute
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.lexer import Span
from xdsl.utils.mlir_lexer import MLIRTokenKind

from fusec.analysis.diagnostics import FusecError, SourceLoc, from_parse_error
from fusec.compiler.source_file import read_source as read_source
from fusec.dialects.nn_base import MAX_RANK, type_str

SPLIT_MARKER = "// -----"
# Regions nested deeper than this are refused: the parser and the passes
# recurse once per level, and Python's stack is far from bottomless. fusec's
# own programs nest three deep (module, function, fusion group).
MAX_REGION_DEPTH = 32


def make_context() -> Context:
    """A context with exactly the dialects fusec programs use, the built-in
    group kinds registered for their `fusion.group`s.

    The `nn` and `fusion` dialects are loaded here directly, not through the
    `xdsl.universe` entry point (which exists for stock `xdsl-opt`), so they
    are registered once. The group-kind registry (`analysis/group_kind.py`)
    sits below the kinds it holds (`scheduling/kinds/`) and cannot load them
    itself: every program fusec reads comes through here, so they are
    registered here.
    """
    from fusec.dialects.fusion import Fusion
    from fusec.dialects.nn import NN
    from fusec.scheduling.kinds import register_builtin_kinds

    register_builtin_kinds()

    ctx = Context()
    for dialect in (Builtin, Func, NN, Fusion):
        ctx.load_dialect(dialect)
    return ctx


class LocatingParser(Parser):
    """A parser that records `file:line:col` on every op it builds, and says
    what went wrong in words where xDSL's own messages are terse: unknown ops
    (with a suggestion), undefined values (at their first use) and an
    unclosed region."""

    def __init__(self, ctx: Context, text: str, name: str) -> None:
        super().__init__(ctx, text, name)
        # Where each not-yet-defined value is first used, to point there if it
        # never gets a definition.
        self._first_use: dict[str, Span[str]] = {}
        # The `{` of each region being parsed, innermost last.
        self._open_regions: list[Span[str]] = []
        # Offsets where each line starts, found once: `Span.get_location()`
        # counts newlines from the start of the input on every call, which
        # made parsing quadratic in the number of ops.
        self._line_starts = [0, *(m + 1 for m in _newlines(text))]
        # `tensor<...>` types by their text: a program repeats a few types
        # thousands of times, and xDSL's type parser is the bulk of parsing.
        self._tensor_types: dict[str, TypeAttribute] = {}
        # How many `[` of a dense literal are open.
        self._literal_depth = 0

    def parse_module(self, allow_implicit_module: bool = True) -> ModuleOp:
        if self._current_token.kind == MLIRTokenKind.EOF:
            self.raise_error(
                "the input holds no operations: expected a module of func.func functions"
            )
        try:
            return super().parse_module(allow_implicit_module)
        except RecursionError:
            # A safety net under the explicit limits below (an attribute or a
            # type nested thousands deep): the place where parsing stopped.
            self.raise_error("the input is nested too deeply to parse")
        except ParseError as err:
            if err.msg == "Could not parse entire input!":
                self.raise_error("expected an operation such as func.func here", err.span)
            undefined = [n for n in self.forward_ssa_references if n in self._first_use]
            if not err.msg.startswith("values used but not defined") or not undefined:
                raise
            name = min(undefined, key=lambda n: self._first_use[n].start)
            span = self._first_use[name]
            self.raise_error(f"use of undefined value %{name}", span.start, span.end)

    def resolve_operand(self, operand: UnresolvedOperand, type: Attribute) -> SSAValue:
        name = operand.operand_name
        if name not in self.ssa_values:
            self._first_use.setdefault(name, operand.span)  # pyright: ignore
        try:
            return super().resolve_operand(operand, type)
        except ParseError as err:
            if not err.msg.startswith("operand is used with type"):
                raise
            known = self.ssa_values.get(name) or self.forward_ssa_references[name]
            had = known[operand.index].type
            self.raise_error(
                f"%{name} has type {type_str(had)} but is used here as {type_str(type)}",
                operand.span,
            )

    def _get_op_by_name(self, name: str) -> type[Operation]:
        known = self.ctx.get_optional_op(name, dialect_stack=self._parser_state.dialect_stack)
        if known is not None:
            return known
        # Suggest only ops of the same dialect whose own names are close.
        dialect, _, short = name.rpartition(".")
        names = [op.name.rpartition(".")[2] for op in self.ctx.loaded_ops
                 if op.name.rpartition(".")[0] == dialect]
        close = difflib.get_close_matches(short, names, n=1, cutoff=0.7)
        if close:
            hint = f"; did you mean '{dialect}.{close[0]}'?"
        elif names:
            hint = f" (the {dialect} dialect has no op of that name)"
        else:
            hint = " (fusec knows the builtin, func, nn and fusion dialects)"
        # The name was just consumed: point at it, not at what follows.
        start = self.lexer.input.content.rfind(name, 0, self.pos)
        self.raise_error(f"unknown op '{name}'{hint}", start, start + len(name))

    def parse_optional_region(
        self, arguments: Iterable[Parser.Argument] | None = None
    ) -> Region | None:
        opens = self._current_token.kind == MLIRTokenKind.L_BRACE
        if opens:
            if len(self._open_regions) >= MAX_REGION_DEPTH:
                self.raise_error(f"regions are nested more than {MAX_REGION_DEPTH} deep")
            self._open_regions.append(self._current_token.span)
        try:
            return super().parse_optional_region(arguments)
        finally:
            if opens:
                self._open_regions.pop()

    def _parse_tensor_literal(self) -> tuple[list[object], list[int]]:  # pyright: ignore
        # A dense literal nests one `[` per dimension; past the most a tensor
        # may have, refuse it before the recursion runs out of stack.
        if self._current_token.kind == MLIRTokenKind.L_SQUARE:
            self._literal_depth += 1
            try:
                if self._literal_depth > MAX_RANK:
                    self.raise_error(
                        f"dense literal nested more than {MAX_RANK} deep "
                        f"(a tensor has at most {MAX_RANK} dimensions)")
                return super()._parse_tensor_literal()  # pyright: ignore
            finally:
                self._literal_depth -= 1
        return super()._parse_tensor_literal()  # pyright: ignore

    def _parse_block(self) -> Block:
        if self._current_token.kind == MLIRTokenKind.EOF and self._open_regions:
            # xDSL would say " in block definition" at the end of the file.
            self.raise_error(
                "this '{' is never closed: the input ends before its '}'",
                self._open_regions[-1],
            )
        return super()._parse_block()

    def parse_optional_type(self) -> TypeAttribute | None:
        token = self._current_token
        content = self.lexer.input.content
        start = token.span.end
        if token.text != "tensor" or content[start:start + 1] != "<":
            return super().parse_optional_type()
        end = content.find(">", start)
        key = content[start:end + 1]
        if end < 0 or key.count("<") != 1:  # nested brackets: not cached
            return super().parse_optional_type()
        if key in self._tensor_types:
            self._resume_from(end + 1)
            return self._tensor_types[key]
        parsed = super().parse_optional_type()
        if parsed is not None and not content[end + 1:self.pos].strip():
            self._tensor_types[key] = parsed
        return parsed

    def parse_operation(self) -> Operation:
        start = self._current_token.span  # pyright: ignore[reportPrivateUsage]
        op = super().parse_operation()
        if isinstance(op.location, UnknownLoc):
            op.location = self._source_loc(start).to_attr()
        return op

    def _source_loc(self, span: Span[str]) -> SourceLoc:
        """`span.get_location()` in O(log lines): bisect the line starts."""
        line = bisect.bisect_right(self._line_starts, span.start)
        col = span.start - self._line_starts[line - 1] + 1
        return SourceLoc(span.input.name, line + span.line_offset, col)


def _newlines(text: str) -> Iterable[int]:
    """Offsets of the newline characters of `text`."""
    pos = text.find("\n")
    while pos >= 0:
        yield pos
        pos = text.find("\n", pos + 1)


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
        module = LocatingParser(ctx, text, filename).parse_module()
    except ParseError as err:
        raise from_parse_error(err) from None
    except VerifyException as err:
        # Raised by attribute constructors while parsing (e.g. a dense literal
        # with the wrong number of elements); it carries no position.
        raise FusecError(str(err).strip(), SourceLoc(filename, 1, 1)) from None
    _drop_empty_name_hints(module)
    return module


def _drop_empty_name_hints(module: ModuleOp) -> None:
    """xDSL's parser strips a `_<digits>` suffix from a value's name (its own
    printer adds one), so `%_62` arrives with the name hint `''`, which no
    pass can copy to a new value (xDSL refuses it): such a value is unnamed."""
    for op in module.walk():
        for value in (*op.results, *(a for r in op.regions for b in r.blocks for a in b.args)):
            if value.name_hint == "":
                value.name_hint = None
