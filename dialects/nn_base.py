"""The base of every `nn` op: shared surface syntax, typed attribute access,
and the checks every op makes (static shapes, supported element types).

Every `nn` op prints and parses in one of two forms (spec/nn-dialect.md):

```mlir
%y = nn.exp %x : tensor<4xf32>
%s = nn.reduce_sum %x {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
```

Attributes live in the op's attribute dictionary (not properties) so that
contracts such as `fusion = "never"` sit beside them; an omitted attribute
takes the default its accessor names. The accessors raise `VerifyException`
with a sentence naming the attribute and what was expected.
"""

from __future__ import annotations

import difflib
import io
from collections.abc import Sequence
from typing import ClassVar, Self

import numpy as np
from xdsl.dialects.builtin import (
    ArrayAttr,
    BytesAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    Signedness,
    StringAttr,
    TensorType,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import IRDLOperation, traits_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from fusec.dialects import element_types
from fusec.dialects.shapes import Shape, ShapeError, fmt


class NNOperation(IRDLOperation):
    """Base of every `nn` op: custom syntax plus attribute accessors.

    Subclasses set `SAME_TYPE_SYNTAX` when operand and result share one type
    and the short `: T` form is printed, and `ARITY` when the op takes a fixed
    number of operands (checked while parsing, with a located message).
    """

    SAME_TYPE_SYNTAX: ClassVar[bool] = False
    ARITY: ClassVar[int | None] = 1

    # --- syntax -----------------------------------------------------------

    @classmethod
    def parse(cls, parser: Parser) -> Self:
        start = parser.pos
        operands = parser.parse_optional_undelimited_comma_separated_list(
            parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand
        ) or []
        if cls.ARITY is not None and len(operands) != cls.ARITY:
            parser.raise_error(
                f"'{cls.name}' expects {cls.ARITY} operand{'s' * (cls.ARITY != 1)}, "
                f"got {len(operands)}",
                start,
                parser.pos,
            )
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":", f" before the type of '{cls.name}'")
        type_pos = parser.pos
        if parser.parse_optional_punctuation("(") is not None:
            inputs = parser.parse_comma_separated_list(
                parser.Delimiter.NONE, parser.parse_type
            ) if parser.parse_optional_punctuation(")") is None else []
            if inputs:
                parser.parse_punctuation(")")
            parser.parse_punctuation("->")
            results = [parser.parse_type()]
        else:
            single = parser.parse_type()
            inputs, results = [single] * len(operands), [single]
        if len(inputs) != len(operands):
            parser.raise_error(
                f"'{cls.name}' has {_count(len(operands), 'operand')} but its type "
                f"lists {_count(len(inputs), 'operand type')}",
                type_pos,
                parser.pos,
            )
        resolved = parser.resolve_operands(operands, inputs, type_pos)
        return cls.create(operands=resolved, result_types=results, attributes=attributes)

    def print(self, printer: Printer) -> None:
        if self.operands:
            printer.print_string(" ")
            printer.print_list(self.operands, printer.print_operand)
        print_attr_dict(printer, self.attributes)
        printer.print_string(" : ")
        types = [o.type for o in self.operands]
        result = self.results[0].type
        if self.SAME_TYPE_SYNTAX and len(types) == 1 and types[0] == result:
            printer.print_attribute(result)
            return
        printer.print_string("(")
        printer.print_list(types, printer.print_attribute)
        printer.print_string(") -> ")
        printer.print_attribute(result)

    # --- typed views ------------------------------------------------------

    def operand_shape(self, index: int = 0) -> Shape:
        """Static shape of operand `index` (verified tensors only)."""
        return tensor_shape(self.operands[index])

    @property
    def result_shape(self) -> Shape:
        """Static shape of the single result."""
        return tensor_shape(self.results[0])

    # --- attribute accessors ------------------------------------------------

    def _fail(self, message: str) -> VerifyException:
        return VerifyException(f"'{self.name}' op {message}")

    def int_list_attr(self, key: str, default: Sequence[int] | None = None) -> list[int]:
        """An integer list written `[1, 2]` (or `array<i64: 1, 2>`)."""
        attr = self.attributes.get(key)
        if attr is None:
            if default is None:
                raise self._fail(f"requires attribute '{key}' (a list of integers)")
            return list(default)
        if isinstance(attr, DenseArrayBase) and isinstance(attr.elt_type, IntegerType):
            return [int(v) for v in attr.get_values()]
        if isinstance(attr, ArrayAttr) and all(
            isinstance(a, IntegerAttr) and not _is_bool(a) for a in attr.data
        ):
            return [int(a.value.data) for a in attr.data]  # pyright: ignore
        raise self._fail(f"attribute '{key}' must be a list of integers like [1, 2]")

    def int_attr(self, key: str, default: int) -> int:
        """An integer attribute such as `groups = 2`."""
        attr = self.attributes.get(key)
        if attr is None:
            return default
        if isinstance(attr, IntegerAttr) and not _is_bool(attr):
            return int(attr.value.data)
        raise self._fail(f"attribute '{key}' must be an integer")

    def bool_attr(self, key: str, default: bool) -> bool:
        """A boolean attribute written `true` or `false`."""
        attr = self.attributes.get(key)
        if attr is None:
            return default
        if isinstance(attr, IntegerAttr) and _is_bool(attr):
            return attr.value.data != 0
        raise self._fail(f"attribute '{key}' must be true or false")

    def float_attr(self, key: str, default: float | None) -> float | None:
        """A float attribute (`1.0e-05 : f32`, a bare float, or an integer)."""
        attr = self.attributes.get(key)
        if attr is None:
            return default
        if isinstance(attr, FloatAttr):
            return float(attr.value.data)
        if isinstance(attr, IntegerAttr) and not _is_bool(attr):
            return float(attr.value.data)
        raise self._fail(f"attribute '{key}' must be a number")

    def str_attr(self, key: str, default: str) -> str:
        """A string attribute such as `approximate = "tanh"`."""
        attr = self.attributes.get(key)
        if attr is None:
            return default
        if isinstance(attr, StringAttr):
            return attr.data
        raise self._fail(f"attribute '{key}' must be a string")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def _is_bool(attr: IntegerAttr) -> bool:  # pyright: ignore[reportMissingTypeArgument]
    return isinstance(attr.type, IntegerType) and attr.type.width.data == 1


def int_list(values: Sequence[int]) -> ArrayAttr[IntegerAttr[IntegerType]]:
    """An integer list attribute, `[1, 2]` (what `int_list_attr` reads)."""
    return ArrayAttr([IntegerAttr(v, IntegerType(64)) for v in values])


def tensor_shape(value: SSAValue) -> Shape:
    """The static shape of a tensor-typed value."""
    t = value.type
    assert isinstance(t, TensorType)
    return tuple(t.get_shape())


def element_type(value: SSAValue) -> Attribute:
    """The element type of a tensor-typed value."""
    t = value.type
    assert isinstance(t, TensorType)
    return t.element_type


# --- printing -----------------------------------------------------------------


def format_float(value: float) -> str:
    """A float literal that MLIR's lexer reads back exactly (`1.0e-05`)."""
    text = repr(float(value))
    if "e" in text:
        mantissa, exponent = text.split("e")
        if "." not in mantissa:
            mantissa += ".0"
        return f"{mantissa}e{exponent}"
    return text


def print_attr_dict(printer: Printer, attributes: dict[str, Attribute]) -> None:
    """Print `{axes = [1], keepdims = true}` in the spec's plain spelling."""
    if not attributes:
        return
    printer.print_string(" {")
    for i, (key, attr) in enumerate(attributes.items()):
        if i:
            printer.print_string(", ")
        printer.print_identifier_or_string_literal(key)
        printer.print_string(" = ")
        print_plain_attr(printer, attr)
    printer.print_string("}")


def print_plain_attr(printer: Printer, attr: Attribute) -> None:
    """Integers, booleans, floats and lists without type suffixes where the
    default type (i64, f64) makes them redundant."""
    if isinstance(attr, IntegerAttr) and _is_bool(attr):
        printer.print_string("true" if attr.value.data else "false")
    elif isinstance(attr, IntegerAttr) and attr.type == IntegerType(64):
        printer.print_string(str(attr.value.data))
    elif isinstance(attr, FloatAttr) and np.isfinite(attr.value.data):
        printer.print_string(_float_literal(attr.value.data, attr.type))
        if attr.type.name != "f64":  # pyright: ignore[reportUnknownMemberType]
            printer.print_string(" : ")
            printer.print_attribute(attr.type)
    elif isinstance(attr, ArrayAttr):
        printer.print_string("[")
        printer.print_list(attr.data, lambda a: print_plain_attr(printer, a))
        printer.print_string("]")
    elif isinstance(attr, DenseIntOrFPElementsAttr):
        print_dense(printer, attr)
    elif isinstance(attr, DictionaryAttr):
        # Nested dictionaries (a group's schedule) in the same plain spelling.
        printer.print_string("{")
        for i, (key, value) in enumerate(attr.data.items()):
            printer.print_string(", " if i else "")
            printer.print_identifier_or_string_literal(key)
            printer.print_string(" = ")
            print_plain_attr(printer, value)
        printer.print_string("}")
    else:
        printer.print_attribute(attr)


def dense_to_numpy(attr: DenseIntOrFPElementsAttr) -> np.ndarray:
    """The elements of a dense attribute as a NumPy array of its shape."""
    t = attr.get_type()
    assert isinstance(t, TensorType)
    raw = attr.data.data
    if element_type_name(t.element_type) == "bf16":  # held as float32 bf16 values
        flat = element_types.bf16_values(np.frombuffer(raw, dtype=np.uint16))
        return _shaped(flat, tuple(t.get_shape()))
    dtype = numpy_dtype(t.element_type)
    if dtype == np.bool_:
        flat = np.frombuffer(raw, dtype=np.uint8) != 0
    else:
        flat = np.frombuffer(raw, dtype=dtype)
    return _shaped(flat, tuple(t.get_shape()))


def _shaped(flat: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if flat.size == 1:
        # A splat (stored as its one element, as MLIR stores it): a read-only
        # view, so a huge splat costs nothing until someone computes with it.
        return np.broadcast_to(flat.reshape(()), shape)
    return flat.reshape(shape).copy()


def splat_value(attr: DenseIntOrFPElementsAttr) -> np.generic | None:
    """The one value of every element of `attr` (a splat, however it is
    stored), or None when they differ or there are none."""
    values = dense_to_numpy(attr)
    if values.size == 0:
        return None
    first = values.reshape(-1)[:1]
    if values.strides.count(0) == values.ndim or bool(np.all(values == first[0])):
        return first[0]
    return None


def numpy_to_dense(array: np.ndarray, t: TensorType) -> DenseIntOrFPElementsAttr:
    """A dense attribute of type `t` holding `array` (of `t`'s shape), stored
    as the parser stores one, so `dense_to_numpy` reads it back bit for bit.
    A broadcast scalar (every stride 0, as `np.broadcast_to` makes) is stored
    as its one element: a splat."""
    values = np.asarray(array)
    assert values.shape == tuple(t.get_shape()), (values.shape, t)
    if values.size > 1 and values.strides.count(0) == values.ndim:
        values = values.reshape(-1)[:1]
    if element_type_name(t.element_type) == "bf16":  # stored as its bits
        values = element_types.bf16_bits(values)
    else:
        values = values.astype(numpy_dtype(t.element_type))
    if values.dtype == np.bool_:
        values = values.astype(np.uint8) * 0xFF  # i1 true is the byte 0xFF, as parsed
    data = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<")).tobytes()
    return DenseIntOrFPElementsAttr(t, BytesAttr(data))


# Constants with more elements than this print as exact hex bytes.
_MAX_LITERAL_ELEMENTS = 16


def print_dense(printer: Printer, attr: DenseIntOrFPElementsAttr) -> None:
    """Print a dense attribute exactly: short ones as shortest-round-trip
    literals, long ones as the hex bytes MLIR also accepts."""
    t = attr.get_type()
    assert isinstance(t, TensorType)
    if element_type_name(t.element_type) not in NUMPY_TYPES:
        # bf16 has no NumPy dtype; xDSL's own spelling is exact enough for it.
        printer.print_attribute(attr)
        return
    values = dense_to_numpy(attr)
    # A splat prints from its one element, however many the type has.
    flat = values.reshape(-1)[:1] if values.strides.count(0) == values.ndim else \
        values.reshape(-1)
    # Non-finite values have no literal spelling that reads back exactly
    # (xDSL's `0xff800000` reads as an integer), so they take the hex form.
    finite = bool(np.all(np.isfinite(flat.astype(np.float64))))
    splat = _is_splat(flat)
    if values.size == 0:
        body = ""
    elif finite and splat:
        body = _literal(flat[0])
    elif finite and flat.size <= _MAX_LITERAL_ELEMENTS:
        body = _nested(values)
    else:
        # One element's bytes stand for a splat (MLIR reads them so).
        data = (flat[:1] if splat else values).astype(values.dtype.newbyteorder("<"))
        if data.dtype == np.bool_:
            data = data.astype(np.uint8) * 0xFF
        body = '"0x' + data.tobytes().hex().upper() + '"'
    printer.print_string(f"dense<{body}> : ")
    printer.print_attribute(t)


def _is_splat(flat: np.ndarray) -> bool:
    """All elements bitwise equal (so `[0.0, -0.0]` is not a splat)."""
    if flat.size == 0:
        return False
    rows = np.ascontiguousarray(flat).view(np.uint8).reshape(flat.size, -1)
    return bool(np.all(rows == rows[0]))


def _float_literal(value: float, t: Attribute) -> str:
    """The shortest literal that reads back as `value` in float type `t`
    (`1.0e-05 : f32` prints as written, not as its f64 expansion)."""
    name = element_type_name(t)
    if name in ("f16", "f32"):
        return _literal(element_types.host_numpy_dtype(name)(value))
    return format_float(value)


def _literal(v: np.generic) -> str:
    if isinstance(v, np.bool_):
        return "true" if v else "false"
    if isinstance(v, np.integer):
        return str(int(v))
    return format_float(float(str(v)))  # str(np.float32) is its shortest repr


def _nested(values: np.ndarray) -> str:
    if values.ndim == 0:
        return _literal(values[()])
    return "[" + ", ".join(_nested(v) for v in values) + "]"


def numpy_dtype(element: Attribute) -> type[np.generic]:
    """The NumPy dtype of a supported element type (bf16 has none)."""
    key = element_type_name(element)
    if key not in NUMPY_TYPES:
        raise ValueError(f"element type {key} has no NumPy equivalent")
    return element_types.host_numpy_dtype(key)


_SIGN_PREFIX = {Signedness.SIGNLESS: "i", Signedness.SIGNED: "si", Signedness.UNSIGNED: "ui"}


def element_type_name(element: Attribute) -> str:
    """`f32`, `i1`, `ui8`, `complex<f32>`, ... as written in a tensor type."""
    if isinstance(element, IntegerType):
        return f"{_SIGN_PREFIX[element.signedness.data]}{element.width.data}"
    name = getattr(element, "name", None)
    if name in FLOAT_TYPES:
        return str(name)
    buf = io.StringIO()
    Printer(stream=buf).print_attribute(element)
    return buf.getvalue()


# --- the base of concrete ops ---------------------------------------------------

FLOAT_TYPES = element_types.FLOAT_NAMES
INT_TYPES = frozenset({"i32", "i64"})
SUPPORTED_TYPES = FLOAT_TYPES | INT_TYPES | {"i1"}
# The supported types with a NumPy dtype of their own (bf16 has none).
NUMPY_TYPES = SUPPORTED_TYPES - {"bf16"}
FUSION_CONTRACTS = ("never", "must")
# The most dimensions a tensor may have: the runtime holds every tensor in a
# NumPy array, and NumPy 1.x (which fusec supports) allows no more than 32.
MAX_RANK = 32


def type_str(t: Attribute) -> str:
    """A tensor type as the user wrote it: `tensor<4x8xf32>`."""
    if isinstance(t, TensorType):
        dims = [("?" if d < 0 else str(d)) for d in t.get_shape()]
        return "tensor<" + "".join(d + "x" for d in dims) + element_type_name(t.element_type) + ">"
    return str(t)


def check_static_tensor(t: Attribute, what: str) -> None:
    """Ranked, static shape, supported element type, or a clear error."""
    if not isinstance(t, TensorType):
        raise VerifyException(f"{what} must be a ranked tensor, got {t}")
    if any(d < 0 for d in t.get_shape()):
        raise VerifyException(
            f"dynamic shapes are not supported: {what} has type {type_str(t)}"
        )
    if t.get_num_dims() > MAX_RANK:
        raise VerifyException(
            f"{what} has {t.get_num_dims()} dimensions; at most {MAX_RANK} are supported"
        )
    name = element_type_name(t.element_type)
    if name not in SUPPORTED_TYPES:
        raise VerifyException(
            f"element type {name} is not supported ({what} has type {type_str(t)}); "
            "use one of " + ", ".join(sorted(SUPPORTED_TYPES))
        )


class NNOp(NNOperation):
    """An `nn` op: checks every tensor, its attribute names, the fusion
    contract, then `check()`.

    `ATTRIBUTES` names the op's own attributes. Any other plain name is an
    error, since a misspelled one (`approx` for `approximate`) would otherwise
    silently take the default; dotted names (`dep.kind`) are annotations
    passes attach, and are allowed on every op.
    """

    ATTRIBUTES: ClassVar[tuple[str, ...]] = ()
    traits = traits_def(Pure())

    def verify_(self) -> None:
        try:
            for i, v in enumerate(self.operands):
                check_static_tensor(v.type, f"operand #{i}")
            for r in self.results:
                check_static_tensor(r.type, "the result")
        except VerifyException as err:
            raise self._fail(str(err)) from None
        self.check_attribute_names()
        contract = self.attributes.get("fusion")
        if contract is not None and self.str_attr("fusion", "") not in FUSION_CONTRACTS:
            raise self._fail('attribute \'fusion\' must be "never" or "must"')
        try:
            self.check()
        except ShapeError as err:
            raise self._fail(str(err)) from None

    def check_attribute_names(self) -> None:
        """Every plain attribute name is one the op knows."""
        known = (*self.ATTRIBUTES, "fusion")
        for key in self.attributes:
            if "." in key or key in known:
                continue
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise self._fail(
                f"has no attribute '{key}'{hint} (its attributes: {', '.join(known)})"
            )

    def check(self) -> None:
        """Op-specific rules; raise `ShapeError` or `self._fail(...)`."""

    def expect_result_shape(self, expected: tuple[int, ...]) -> None:
        if self.result_shape != expected:
            raise self._fail(
                f"result shape {fmt(self.result_shape)} does not match the "
                f"expected {fmt(expected)}"
            )

    def expect_element(self, index: int, ALLOWED: frozenset[str], what: str) -> str:
        name = element_type_name(element_type(self.operands[index]))
        if name not in ALLOWED:
            raise self._fail(f"operand #{index} must have {what} elements, got {name}")
        return name

    def expect_same_result_element(self, index: int = 0) -> None:
        src = element_type(self.operands[index])
        dst = element_type(self.results[0])
        if src != dst:
            raise self._fail(
                f"result element type {element_type_name(dst)} differs from operand "
                f"element type {element_type_name(src)}"
            )
