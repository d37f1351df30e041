"""The `nn` tensor dialect: the input language of fusec (spec/nn-dialect.md).

```mlir
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %m = nn.reduce_max %x {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %d = nn.sub %x, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %e = nn.exp %d : tensor<4x8xf32>
  %s = nn.reduce_sum %e {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %y = nn.div %e, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
```

Every op verifies its shapes, element types and attributes; a violation raises
`VerifyException` whose message starts with `'nn.<op>' op` and says what was
expected. The driver adds the op's `file:line:col`.
"""

from __future__ import annotations

import re
from typing import ClassVar

import numpy as np
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, TensorType
from xdsl.ir import Dialect
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError

from fusec.dialects import element_types, shapes
from fusec.dialects.dense_splat import parse_optional_splat
from fusec.dialects.nn_base import (
    FLOAT_TYPES,
    INT_TYPES,
    NNOp,
    element_type,
    element_type_name,
    numpy_dtype,
    numpy_to_dense,
    print_attr_dict,
    print_dense,
    type_str,
)

# --- elementwise, one operand ------------------------------------------------


class UnaryOp(NNOp):
    """Elementwise op with one operand; result type equals operand type."""

    SAME_TYPE_SYNTAX: ClassVar[bool] = True
    ALLOWED: ClassVar[frozenset[str]] = FLOAT_TYPES
    x = operand_def(TensorType)
    result = result_def(TensorType)

    def check(self) -> None:
        self.expect_element(0, self.ALLOWED, "floating-point" if self.ALLOWED == FLOAT_TYPES
                            else "numeric")
        if self.x.type != self.result.type:
            raise self._fail(
                f"result type {type_str(self.result.type)} must equal the operand "
                f"type {type_str(self.x.type)}"
            )
        self.check_attrs()

    def check_attrs(self) -> None:
        """Attribute rules of ops with attributes (gelu, clamp)."""


def _unary(op_name: str, doc: str, numeric: bool = False) -> type[UnaryOp]:
    allowed = FLOAT_TYPES | INT_TYPES if numeric else FLOAT_TYPES
    cls = type(
        op_name.split(".")[1].title().replace("_", "") + "Op",
        (UnaryOp,),
        {
            "name": op_name,
            "ALLOWED": allowed,
            "__annotations__": {"ALLOWED": "ClassVar[frozenset[str]]"},
            "__doc__": doc + f"\n\n```mlir\n%y = {op_name} %x : tensor<4xf32>\n```",
        },
    )
    return irdl_op_definition(cls)


NegOp = _unary("nn.neg", "Negation, `-x`.", numeric=True)
AbsOp = _unary("nn.abs", "Absolute value.", numeric=True)
ExpOp = _unary("nn.exp", "Natural exponential.")
LogOp = _unary("nn.log", "Natural logarithm.")
SqrtOp = _unary("nn.sqrt", "Square root.")
RsqrtOp = _unary("nn.rsqrt", "Reciprocal square root, `1 / sqrt(x)`.")
ReciprocalOp = _unary("nn.reciprocal", "Reciprocal, `1 / x`.")
TanhOp = _unary("nn.tanh", "Hyperbolic tangent.")
ErfOp = _unary("nn.erf", "Gauss error function.")
SinOp = _unary("nn.sin", "Sine, `x` in radians.")
CosOp = _unary("nn.cos", "Cosine, `x` in radians.")
SigmoidOp = _unary("nn.sigmoid", "Logistic sigmoid, `1 / (1 + exp(-x))`.")
ReluOp = _unary("nn.relu", "Rectifier, `max(x, 0)`.", numeric=True)
SiluOp = _unary("nn.silu", "SiLU, `x * sigmoid(x)`.")

GELU_APPROXIMATIONS = ("none", "tanh")


@irdl_op_definition
class GeluOp(UnaryOp):
    """GELU, exact (`approximate = "none"`, the erf form) or the tanh form.

    ```mlir
    %y = nn.gelu %x {approximate = "tanh"} : tensor<4xf32>
    ```
    """

    name = "nn.gelu"
    ATTRIBUTES: ClassVar[tuple[str, ...]] = ("approximate",)

    @property
    def approximate(self) -> str:
        return self.str_attr("approximate", "none")

    def check_attrs(self) -> None:
        if self.approximate not in GELU_APPROXIMATIONS:
            raise self._fail(
                f"unknown approximation \"{self.approximate}\"; expected \"none\" or \"tanh\""
            )


@irdl_op_definition
class ClampOp(UnaryOp):
    """Clamp into `[min, max]`; either bound may be omitted (unbounded).

    ```mlir
    %y = nn.clamp %x {min = 0.0, max = 6.0} : tensor<4xf32>
    ```
    """

    name = "nn.clamp"
    ATTRIBUTES: ClassVar[tuple[str, ...]] = ("min", "max")
    ALLOWED: ClassVar[frozenset[str]] = FLOAT_TYPES | INT_TYPES

    @property
    def min(self) -> float | None:
        return self.float_attr("min", None)

    @property
    def max(self) -> float | None:
        return self.float_attr("max", None)

    def check_attrs(self) -> None:
        lo, hi = self.min, self.max
        if lo is not None and hi is not None and lo > hi:
            raise self._fail(f"min = {lo} is greater than max = {hi}")


# --- elementwise, broadcasting -------------------------------------------------


class BinaryOp(NNOp):
    """Elementwise op of two operands with NumPy broadcasting."""

    ARITY: ClassVar[int | None] = 2
    ALLOWED: ClassVar[frozenset[str]] = FLOAT_TYPES | INT_TYPES
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)

    def check(self) -> None:
        what = "floating-point" if self.ALLOWED == FLOAT_TYPES else "numeric"
        a = self.expect_element(0, self.ALLOWED, what)
        b = self.expect_element(1, self.ALLOWED, what)
        if a != b:
            raise self._fail(f"operand element types differ: {a} and {b}")
        self.expect_same_result_element()
        self.expect_result_shape(
            shapes.broadcast_shapes(self.operand_shape(0), self.operand_shape(1))
        )


def _binary(op_name: str, doc: str, float_only: bool = False) -> type[BinaryOp]:
    attrs: dict[str, object] = {
        "name": op_name,
        "__doc__": doc + f"\n\n```mlir\n%z = {op_name} %a, %b : "
        "(tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>\n```",
    }
    if float_only:
        attrs["ALLOWED"] = FLOAT_TYPES
        attrs["__annotations__"] = {"ALLOWED": "ClassVar[frozenset[str]]"}
    cls = type(op_name.split(".")[1].title() + "Op", (BinaryOp,), attrs)
    return irdl_op_definition(cls)


AddOp = _binary("nn.add", "Addition.")
SubOp = _binary("nn.sub", "Subtraction.")
MulOp = _binary("nn.mul", "Multiplication.")
DivOp = _binary("nn.div", "Division.", float_only=True)
MaxOp = _binary("nn.max", "Elementwise maximum.")
MinOp = _binary("nn.min", "Elementwise minimum.")
PowOp = _binary("nn.pow", "Power, `a ** b`.", float_only=True)

CMP_PREDICATES = ("lt", "le", "gt", "ge", "eq", "ne")


@irdl_op_definition
class CmpOp(NNOp):
    """Elementwise comparison with broadcasting; the result is an i1 mask.

    ```mlir
    %m = nn.cmp %a, %b {predicate = "lt"} : (tensor<4xf32>, tensor<f32>) -> tensor<4xi1>
    ```
    """

    name = "nn.cmp"
    ATTRIBUTES: ClassVar[tuple[str, ...]] = ("predicate",)
    ARITY: ClassVar[int | None] = 2
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)

    @property
    def predicate(self) -> str:
        attr = self.attributes.get("predicate")
        if attr is None:
            raise self._fail("requires attribute 'predicate' (lt, le, gt, ge, eq or ne)")
        return self.str_attr("predicate", "")

    def check(self) -> None:
        if self.predicate not in CMP_PREDICATES:
            raise self._fail(
                f"unknown predicate \"{self.predicate}\"; expected one of "
                + ", ".join(CMP_PREDICATES)
            )
        a = element_type_name(element_type(self.lhs))
        b = element_type_name(element_type(self.rhs))
        if a != b:
            raise self._fail(f"operand element types differ: {a} and {b}")
        if element_type_name(element_type(self.result)) != "i1":
            raise self._fail("result must have element type i1")
        self.expect_result_shape(
            shapes.broadcast_shapes(self.operand_shape(0), self.operand_shape(1))
        )


@irdl_op_definition
class SelectOp(NNOp):
    """`cond ? a : b` elementwise, all three broadcast together.

    ```mlir
    %y = nn.select %m, %a, %b : (tensor<4xi1>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    ```
    """

    name = "nn.select"
    ARITY: ClassVar[int | None] = 3
    cond = operand_def(TensorType)
    on_true = operand_def(TensorType)
    on_false = operand_def(TensorType)
    result = result_def(TensorType)

    def check(self) -> None:
        if element_type_name(element_type(self.cond)) != "i1":
            raise self._fail("operand #0 (the condition) must have element type i1")
        a = element_type_name(element_type(self.on_true))
        b = element_type_name(element_type(self.on_false))
        if a != b:
            raise self._fail(f"operand element types differ: {a} and {b}")
        self.expect_same_result_element(1)
        self.expect_result_shape(
            shapes.broadcast_shapes(*(self.operand_shape(i) for i in range(3)))
        )


@irdl_op_definition
class CastOp(NNOp):
    """Element type conversion; the shape is unchanged.

    ```mlir
    %h = nn.cast %x : (tensor<4xf32>) -> tensor<4xf16>
    ```
    """

    name = "nn.cast"
    x = operand_def(TensorType)
    result = result_def(TensorType)

    def check(self) -> None:
        self.expect_result_shape(self.operand_shape())


@irdl_op_definition
class ConstantOp(NNOp):
    """A constant tensor from a builtin dense elements attribute.

    ```mlir
    %c = nn.constant dense<0.5> : tensor<f32>
    ```
    """

    name = "nn.constant"
    ATTRIBUTES: ClassVar[tuple[str, ...]] = ("value",)
    ARITY: ClassVar[int | None] = 0
    result = result_def(TensorType)

    @property
    def value(self) -> DenseIntOrFPElementsAttr:
        attr = self.attributes["value"]
        assert isinstance(attr, DenseIntOrFPElementsAttr)
        return attr

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        attributes = parser.parse_optional_attr_dict()
        pos = parser.pos
        if parser.parse_optional_unresolved_operand() is not None:
            parser.raise_error(
                "'nn.constant' takes no operands: write nn.constant dense<0.5> : tensor<f32>",
                pos,
                parser.pos,
            )
        try:
            value = parse_optional_splat(parser) or parser.parse_attribute()
        except ParseError as err:
            # xDSL's own wording ("Shape mismatch in dense literal...") names no op.
            parser.raise_error(
                f"'nn.constant' has an invalid value: {err.msg[:1].lower()}{err.msg[1:]}",
                pos,
                parser.pos,
            )
        except OverflowError:  # xDSL packs each literal into the element type
            parser.raise_error(
                "'nn.constant' has a value out of range of its element type", pos, parser.pos)
        if not isinstance(value, DenseIntOrFPElementsAttr):
            parser.raise_error(
                "'nn.constant' expects a dense elements attribute like "
                "dense<0.5> : tensor<f32>",
                pos,
                parser.pos,
            )
        attributes["value"] = _bare_hex_float(parser, value, pos)
        return cls.create(result_types=[value.get_type()], attributes=attributes)

    def print(self, printer: Printer) -> None:
        print_attr_dict(printer, {k: v for k, v in self.attributes.items() if k != "value"})
        printer.print_string(" ")
        print_dense(printer, self.value)

    def check(self) -> None:
        value = self.attributes.get("value")
        if not isinstance(value, DenseIntOrFPElementsAttr):
            raise self._fail(
                "requires attribute 'value', a dense elements attribute like "
                "dense<0.5> : tensor<f32>"
            )
        if value.get_type() != self.result.type:
            raise self._fail(
                f"value has type {type_str(value.get_type())} but the result has "
                f"type {type_str(self.result.type)}"
            )


_BARE_HEX = re.compile(r"dense\s*<\s*(0x[0-9a-fA-F]+)\s*>")


def _bare_hex_float(parser: Parser, value: DenseIntOrFPElementsAttr,
                    pos: int) -> DenseIntOrFPElementsAttr:
    """MLIR reads `dense<0xFF800000> : tensor<f32>` as the bit pattern of the
    float (-inf); xDSL reads the integer 4286578688 and converts it. Take
    the MLIR meaning for a bare hex splat of exactly one element's width, and
    refuse other bare hex literals of floats rather than guess."""
    text = parser.lexer.input.slice(pos, parser.pos) or ""
    match = _BARE_HEX.match(text.strip())
    t = value.get_type()
    if match is None or not isinstance(t, TensorType):
        return value
    name = element_type_name(t.element_type)
    if name not in element_types.FLOAT_NAMES:
        return value
    digits = match.group(1)[2:]
    width = element_types.element(name).width
    if len(digits) != 2 * width:
        parser.raise_error(
            f"'nn.constant' has a bare hex literal {match.group(1)} for {name} elements: "
            f"write one element's bits ({2 * width} hex digits) or all bytes "
            'quoted, as dense<"0x...">', pos, parser.pos)
    bits = np.array([int(digits, 16)], dtype=f"u{width}")
    # bf16 has no NumPy type: its bits are the upper half of a float32's
    values = element_types.bf16_values(bits) if name == "bf16" else \
        bits.view(numpy_dtype(t.element_type))
    return numpy_to_dense(np.broadcast_to(values[0], t.get_shape()), t)


# --- reductions ------------------------------------------------------------------


class ReduceOp(NNOp):
    """Reduction over `axes` (required) with `keepdims` (default false)."""

    ATTRIBUTES: ClassVar[tuple[str, ...]] = ("axes", "keepdims")

    ALLOWED: ClassVar[frozenset[str]] = FLOAT_TYPES | INT_TYPES
    x = operand_def(TensorType)
    result = result_def(TensorType)

    @property
    def axes(self) -> tuple[int, ...]:
        """The reduced axes, normalized to `[0, rank)` and sorted."""
        return shapes.normalize_axes(self.int_list_attr("axes"), len(self.operand_shape()))

    @property
    def keepdims(self) -> bool:
        return self.bool_attr("keepdims", False)

    def check(self) -> None:
        what = "floating-point" if self.ALLOWED == FLOAT_TYPES else "numeric"
        self.expect_element(0, self.ALLOWED, what)
        raw = self.int_list_attr("axes")
        if not raw:
            raise self._fail("attribute 'axes' must name at least one axis")
        self.expect_same_result_element()
        self.expect_result_shape(
            shapes.reduced_shape(self.operand_shape(), self.axes, self.keepdims)
        )
        empty = [a for a in self.axes if self.operand_shape()[a] == 0]
        if empty and self.name in ("nn.reduce_max", "nn.reduce_min") and \
                0 not in self.result_shape:
            # As in NumPy and PyTorch: no element has no maximum.
            raise self._fail(f"reduces over axis {empty[0]} of size 0: the "
                             f"{self.name[10:]}imum of no elements is undefined")


def _reduce(op_name: str, doc: str, float_only: bool = False) -> type[ReduceOp]:
    attrs: dict[str, object] = {
        "name": op_name,
        "__doc__": doc + f"\n\n```mlir\n%s = {op_name} %x {{axes = [1], keepdims = true}}"
        " : (tensor<4x8xf32>) -> tensor<4x1xf32>\n```",
    }
    if float_only:
        attrs["ALLOWED"] = FLOAT_TYPES
        attrs["__annotations__"] = {"ALLOWED": "ClassVar[frozenset[str]]"}
    name = "Reduce" + op_name.split("_")[1].title() + "Op"
    return irdl_op_definition(type(name, (ReduceOp,), attrs))


ReduceSumOp = _reduce("nn.reduce_sum", "Sum over `axes`.")
ReduceMaxOp = _reduce("nn.reduce_max", "Maximum over `axes`.")
ReduceMinOp = _reduce("nn.reduce_min", "Minimum over `axes`.")
ReduceMeanOp = _reduce("nn.reduce_mean", "Mean over `axes`.", float_only=True)


from fusec.dialects.nn_structured import (  # noqa: E402  (kept beside their kin)
    AvgPool2dOp,
    BatchNormOp,
    BroadcastToOp,
    ConcatOp,
    Conv2dOp,
    GatherOp,
    LayerNormOp,
    LogSoftmaxOp,
    MatmulOp,
    MaxPool2dOp,
    ReshapeOp,
    RmsNormOp,
    SliceOp,
    SoftmaxOp,
    TransposeOp,
)

NN = Dialect(
    "nn",
    [
        NegOp, AbsOp, ExpOp, LogOp, SqrtOp, RsqrtOp, ReciprocalOp, TanhOp, ErfOp, SinOp, CosOp,
        SigmoidOp, ReluOp, SiluOp, GeluOp, ClampOp,
        AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, PowOp, CmpOp, SelectOp, CastOp,
        ConstantOp,
        ReduceSumOp, ReduceMaxOp, ReduceMinOp, ReduceMeanOp,
        SoftmaxOp, LogSoftmaxOp, LayerNormOp, RmsNormOp, BatchNormOp,
        MatmulOp, Conv2dOp, MaxPool2dOp, AvgPool2dOp,
        ReshapeOp, BroadcastToOp, TransposeOp, SliceOp, ConcatOp, GatherOp,
    ],
    [],
)
"""The `nn` dialect: every op of spec/nn-dialect.md."""


