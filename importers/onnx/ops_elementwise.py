"""Elementwise ONNX ops: unary math, broadcasting arithmetic, comparisons,
`Where`, `Clip`, `Cast`.

```mlir
// Relu(x), Add(x, b), Less(x, y)
%r = nn.relu %x : tensor<2x3xf32>
%s = nn.add %r, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
%m = nn.cmp %s, %y {predicate = "lt"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
```
"""

from __future__ import annotations

import numpy as np
from onnx import helper

from fusec.dialects import shapes
from fusec.importers.onnx.context import Handler, NodeCtx, Value
from fusec.importers.onnx.emit import ELEMENT_TYPES, FLOAT_DTYPES, INT_DTYPES, Val

NUMERIC = FLOAT_DTYPES | INT_DTYPES

# ONNX op -> (nn op, element types it takes).
_UNARY: dict[str, tuple[str, frozenset[str]]] = {
    "Neg": ("neg", NUMERIC),
    "Abs": ("abs", NUMERIC),
    "Exp": ("exp", FLOAT_DTYPES),
    "Log": ("log", FLOAT_DTYPES),
    "Sqrt": ("sqrt", FLOAT_DTYPES),
    "Reciprocal": ("reciprocal", FLOAT_DTYPES),
    "Tanh": ("tanh", FLOAT_DTYPES),
    "Erf": ("erf", FLOAT_DTYPES),
    "Sin": ("sin", FLOAT_DTYPES),
    "Cos": ("cos", FLOAT_DTYPES),
    "Sigmoid": ("sigmoid", FLOAT_DTYPES),
    "Relu": ("relu", NUMERIC),
}

_BINARY: dict[str, tuple[str, frozenset[str]]] = {
    "Add": ("add", NUMERIC),
    "Sub": ("sub", NUMERIC),
    "Mul": ("mul", NUMERIC),
    # nn.div is float-only: ONNX integer Div truncates, which nn cannot say.
    "Div": ("div", FLOAT_DTYPES),
    "Max": ("max", NUMERIC),
    "Min": ("min", NUMERIC),
}

_COMPARE: dict[str, str] = {
    "Equal": "eq",
    "Less": "lt",
    "LessOrEqual": "le",
    "Greater": "gt",
    "GreaterOrEqual": "ge",
}


def _unary(nn_name: str, allowed: frozenset[str]) -> Handler:
    def handle(ctx: NodeCtx) -> Value:
        ctx.only_attrs(())
        x = ctx.tensor(0)
        ctx.expect_dtype(x, allowed, f"nn.{nn_name} takes " + _kinds(allowed))
        return ctx.em.unary(nn_name, x, ctx.hint)

    return handle


def _kinds(allowed: frozenset[str]) -> str:
    return "floating-point elements" if allowed == FLOAT_DTYPES else "numeric elements"


def _binary(nn_name: str, allowed: frozenset[str]) -> Handler:
    def handle(ctx: NodeCtx) -> Value:
        ctx.only_attrs(())
        # Max and Min are variadic: fold the operands left to right.
        acc = ctx.tensor(0)
        ctx.expect_dtype(acc, allowed, f"nn.{nn_name} takes " + _kinds(allowed))
        for i in range(1, ctx.num_inputs):
            acc = _checked_binary(ctx, nn_name, acc, ctx.tensor(i))
        return acc

    return handle


def _checked_binary(ctx: NodeCtx, nn_name: str, a: Val, b: Val) -> Val:
    try:
        return ctx.em.binary(nn_name, a, b, ctx.hint)
    except shapes.ShapeError as err:
        raise ctx.fail(str(err)) from None


def _compare(predicate: str) -> Handler:
    def handle(ctx: NodeCtx) -> Value:
        ctx.only_attrs(())
        a, b = ctx.tensor(0), ctx.tensor(1)
        try:
            shape = shapes.broadcast_shapes(a.shape, b.shape)
        except shapes.ShapeError as err:
            raise ctx.fail(str(err)) from None
        attrs = {"predicate": predicate}
        return ctx.em.op("cmp", [a, b], shape, np.dtype(bool), attrs, ctx.hint)

    return handle


def _pow(ctx: NodeCtx) -> Value:
    base, exponent = ctx.tensor(0), ctx.tensor(1)
    ctx.expect_dtype(base, FLOAT_DTYPES, "nn.pow takes floating-point elements")
    # ONNX lets the exponent have its own type; nn.pow wants the base's.
    exponent = ctx.em.cast(exponent, base.dtype, ctx.hint)
    return _checked_binary(ctx, "pow", base, exponent)


def _gelu(ctx: NodeCtx) -> Value:
    ctx.only_attrs(("approximate",))
    approximate = ctx.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise ctx.fail(f"approximate '{approximate}' is not supported")
    x = ctx.tensor(0)
    ctx.expect_dtype(x, FLOAT_DTYPES, "nn.gelu takes floating-point elements")
    return ctx.em.unary("gelu", x, ctx.hint, approximate=approximate)


def _clip(ctx: NodeCtx) -> Value:
    """`nn.clamp` when the bounds are constants, `nn.max`/`nn.min` otherwise."""
    ctx.only_attrs(())
    x = ctx.tensor(0)
    ctx.expect_dtype(x, NUMERIC, "nn.clamp takes numeric elements")
    bounds: dict[str, object] = {}
    for i, key in ((1, "min"), (2, "max")):
        if not ctx.has(i):
            continue
        bound = ctx.value(i)
        if isinstance(bound, np.ndarray):
            if bound.size != 1:
                raise ctx.fail(f"{key} must be a scalar, got shape {list(bound.shape)}")
            scalar = bound.reshape(()).item()
            bounds[key] = int(scalar) if x.dtype.kind == "i" else float(scalar)
        else:
            x = ctx.em.binary("max" if key == "min" else "min", x, bound, ctx.hint)
    if not bounds:
        return x
    return ctx.em.unary("clamp", x, ctx.hint, **bounds)


def _where(ctx: NodeCtx) -> Value:
    ctx.only_attrs(())
    cond, a, b = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    try:
        shape = shapes.broadcast_shapes(cond.shape, a.shape, b.shape)
    except shapes.ShapeError as err:
        raise ctx.fail(str(err)) from None
    return ctx.em.op("select", [cond, a, b], shape, a.dtype, hint=ctx.hint)


def onnx_dtype(ctx: NodeCtx, onnx_type: int) -> np.dtype:
    """The NumPy dtype of an ONNX element type fusec supports, or a clear error."""
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(onnx_type))
    except (KeyError, TypeError, ValueError):
        dtype = None
    if dtype is None or dtype.name not in ELEMENT_TYPES:
        name = helper.tensor_dtype_to_string(onnx_type) if onnx_type else "undefined"
        raise ctx.fail(f"element type {name.removeprefix('TensorProto.')} is not supported")
    return dtype


def _cast(ctx: NodeCtx) -> Value:
    ctx.only_attrs(("to", "saturate", "round_mode"))
    x = ctx.tensor(0)
    return ctx.em.cast(x, onnx_dtype(ctx, int(ctx.attr("to"))), ctx.hint)


def _cast_like(ctx: NodeCtx) -> Value:
    ctx.only_attrs(("saturate", "round_mode"))
    target = ctx.value(1)
    return ctx.em.cast(ctx.tensor(0), np.dtype(target.dtype), ctx.hint)


def _logical(nn_name: str) -> Handler:
    """And / Or of masks: `nn.min` / `nn.max` of the masks as 0/1 integers
    (`nn` has no logical ops, and its min and max take no i1)."""

    def handle(ctx: NodeCtx) -> Value:
        ctx.only_attrs(())
        a, b = ctx.tensor(0), ctx.tensor(1)
        i32 = np.dtype(np.int32)
        both = _checked_binary(ctx, nn_name, ctx.em.cast(a, i32, ctx.hint),
                               ctx.em.cast(b, i32, ctx.hint))
        return ctx.em.cast(both, a.dtype, ctx.hint)

    return handle


def _not(ctx: NodeCtx) -> Value:
    ctx.only_attrs(())
    x = ctx.tensor(0)
    false = ctx.constant(np.asarray(False), "false")
    return ctx.em.op("cmp", [x, false], x.shape, x.dtype, {"predicate": "eq"}, ctx.hint)


def _isnan(ctx: NodeCtx) -> Value:
    """IsNaN(x) = x != x: nn has no isnan op, and only NaN differs from itself."""
    ctx.only_attrs(())
    x = ctx.tensor(0)
    ctx.expect_dtype(x, FLOAT_DTYPES, "IsNaN takes floats")
    return ctx.em.op("cmp", [x, x], x.shape, np.dtype(bool), {"predicate": "ne"}, ctx.hint)


def _isinf(ctx: NodeCtx) -> Value:
    """IsInf(x) as comparisons with the infinities (attributes `detect_negative`,
    `detect_positive`, both on by default)."""
    ctx.only_attrs(("detect_negative", "detect_positive"))
    x = ctx.tensor(0)
    ctx.expect_dtype(x, FLOAT_DTYPES, "IsInf takes floats")
    negative, positive = ctx.attr("detect_negative", 1), ctx.attr("detect_positive", 1)
    if negative and positive:
        x, sign = ctx.em.unary("abs", x, ctx.hint), 1.0
    elif negative or positive:
        sign = 1.0 if positive else -1.0
    else:  # neither: all false
        sign = float("nan")  # NaN equals nothing
    inf = ctx.constant(np.asarray(sign * np.inf, dtype=x.dtype), "inf")
    return ctx.em.op("cmp", [x, inf], x.shape, np.dtype(bool), {"predicate": "eq"}, ctx.hint)


def _identity(ctx: NodeCtx) -> Value:
    ctx.only_attrs(())
    return ctx.value(0)


def _dropout(ctx: NodeCtx) -> list[Value]:
    """Inference Dropout is the identity and its mask all true; training with
    a nonzero ratio is random and refused."""
    # `ratio` and `is_test` are attributes before opset 12, which had no training input.
    ctx.only_attrs(("seed", "ratio", "is_test"))
    training = ctx.has(2) and bool(np.asarray(ctx.const(2, "training_mode")).reshape(()))
    ratio = float(np.asarray(ctx.const(1, "ratio")).reshape(())) if ctx.has(1) else 0.5
    if training and ratio != 0.0:
        raise ctx.fail(f"training_mode = true with ratio {ratio} (random) is not supported")
    x = ctx.value(0)
    return [x, np.ones(x.shape, dtype=bool)]


HANDLERS: dict[str, Handler] = {
    **{op: _unary(name, allowed) for op, (name, allowed) in _UNARY.items()},
    **{op: _binary(name, allowed) for op, (name, allowed) in _BINARY.items()},
    **{op: _compare(pred) for op, pred in _COMPARE.items()},
    "Pow": _pow,
    "Gelu": _gelu,
    "Clip": _clip,
    "Where": _where,
    "Cast": _cast,
    "CastLike": _cast_like,
    "And": _logical("min"),
    "Or": _logical("max"),
    "Not": _not,
    "IsNaN": _isnan,
    "IsInf": _isinf,
    "Sum": _binary("add", NUMERIC),
    "Identity": _identity,
    "Dropout": _dropout,
}
"""Elementwise ONNX op type -> handler."""
