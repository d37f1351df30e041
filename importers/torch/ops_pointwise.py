"""ATen elementwise ops -> `nn` elementwise ops, comparisons, `nn.select`, casts.

PyTorch's type promotion is read off the traced result (`ctx.out_dtype`):
operands are cast to it first, so `int_tensor * 0.5` multiplies in f32 as
eager does.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from fusec.importers.onnx.emit import FLOAT_DTYPES, Val
from fusec.importers.torch.context import OpCtx, Translator, Value, is_float, schema_args

aten = torch.ops.aten


def _operand(ctx: OpCtx, arg: Any, dtype: np.dtype) -> Val:
    """A tensor or Python-number operand as a value of `dtype`."""
    if isinstance(arg, bool | int | float):
        return ctx.scalar(arg, dtype)
    return ctx.em.cast(ctx.as_val(arg), dtype, ctx.hint)


def _rounded_by(value: Any, dtype: np.dtype) -> bool:
    """Whether Python number `value` changes when stored as a half `dtype`
    (f16 or bf16: 1e5 is inf in f16, 0.1 is 0.0999755859375)."""
    if dtype.itemsize != 2 or dtype.name not in FLOAT_DTYPES or isinstance(value, bool):
        return False
    if not isinstance(value, int | float):
        return False
    with np.errstate(over="ignore"):
        return float(np.asarray(value, dtype=dtype)) != value


# A Boolean tensor's `*` and `min` are a logical and, its `+` and `max` a logical or.
_BOOL_AND = {"mul": True, "min": True, "add": False, "max": False}


def _binary(name: str) -> Translator:
    def translate(ctx: OpCtx) -> Value:
        dtype = ctx.out_dtype
        self_arg = ctx.arg("self")
        other = ctx.arg("other") if "other" in _schema_names(ctx) else ctx.arg("exponent")
        alpha = ctx.arg("alpha") if "alpha" in _schema_names(ctx) else None
        if dtype.kind == "b":
            if name not in _BOOL_AND or alpha not in (None, 1, True):
                raise ctx.fail(f"nn.{name} of Boolean tensors is not supported")
            a, b = _operand(ctx, self_arg, dtype), _operand(ctx, other, dtype)
            return _bool_select(ctx, a, b, _BOOL_AND[name])
        if name in ("div", "pow") and dtype.name not in FLOAT_DTYPES:
            raise ctx.fail(f"integer {'division' if name == 'div' else 'powers'} "
                           "are not supported")
        # PyTorch computes a half op with a Python number in f32 and rounds
        # the result once: a number the half type would round (1e5 in f16,
        # 0.1) is kept in f32 with the op, else the half op is the same.
        compute = (np.dtype(np.float32)
                   if any(_rounded_by(v, dtype) for v in (self_arg, other, alpha)) else dtype)
        a, b = _operand(ctx, self_arg, compute), _operand(ctx, other, compute)
        if alpha not in (None, 1):
            b = ctx.em.binary("mul", b, ctx.scalar(alpha, compute), ctx.hint)
        return ctx.em.cast(ctx.em.binary(name, a, b, ctx.hint), dtype, ctx.hint)

    return translate


def _schema_names(ctx: OpCtx) -> set[str]:
    return set(schema_args(ctx.node))


def _unary(name: str, float_only: bool = True, **attrs: object) -> Translator:
    def translate(ctx: OpCtx) -> Value:
        x = ctx.em.cast(ctx.tensor("self"), ctx.out_dtype, ctx.hint)
        if float_only and x.dtype.name not in FLOAT_DTYPES:
            raise ctx.fail(f"element type {x.dtype} is not supported (nn.{name} takes floats)")
        return ctx.em.unary(name, x, ctx.hint, **attrs)

    return translate


def _f32_input(ctx: OpCtx) -> Val:
    """The node's float input, a half one widened to f32 (the composites
    below hold their precision in f32 and round once, at the end)."""
    x = ctx.em.cast(ctx.tensor("self"), ctx.out_dtype, ctx.hint)
    if x.dtype.name not in FLOAT_DTYPES:
        raise ctx.fail(f"element type {x.dtype} is not supported (floats only)")
    return ctx.em.cast(x, np.dtype(np.float32), ctx.hint) if x.dtype.itemsize == 2 else x


def _select_where(ctx: OpCtx, predicate: str, a: Val, b: Val, then: Val, other: Val) -> Val:
    """`then` where `a predicate b`, else `other` (same shapes)."""
    return ctx.em.op("select", [_compare(ctx, predicate, a, b), then, other], then.shape,
                     then.dtype, hint=ctx.hint)


def _expm1(ctx: OpCtx) -> Value:
    """`exp(x) - 1` to full precision near 0 (Kahan: with u = exp(x), the
    rounding of `u - 1` is divided out by `log(u)`): x where u is 1, -1
    where `u - 1` is, u where it is inf."""
    x = _f32_input(ctx)
    em, h = ctx.em, ctx.hint
    one, inf = ctx.scalar(1.0, x.dtype), ctx.scalar(math.inf, x.dtype)
    u = em.unary("exp", x, h)
    um1 = em.binary("sub", u, one, h)
    kahan = em.binary("mul", um1, em.binary("div", x, em.unary("log", u, h), h), h)
    minus_one = em.broadcast_to(ctx.scalar(-1.0, x.dtype), x.shape, h)
    out = _select_where(ctx, "eq", u, inf, u, kahan)
    out = _select_where(ctx, "eq", um1, minus_one, minus_one, out)
    out = _select_where(ctx, "eq", u, one, x, out)
    return em.cast(out, ctx.out_dtype, h)


def _log1p(ctx: OpCtx) -> Value:
    """`log(1 + y)` to full precision near 0 (Goldberg: the rounding of
    `u = 1 + y` is corrected by `y / (u - 1)`): y where u is 1, u where it
    is inf."""
    y = _f32_input(ctx)
    em, h = ctx.em, ctx.hint
    one, inf = ctx.scalar(1.0, y.dtype), ctx.scalar(math.inf, y.dtype)
    u = em.binary("add", y, one, h)
    exact = em.binary("mul", em.unary("log", u, h),
                      em.binary("div", y, em.binary("sub", u, one, h), h), h)
    out = _select_where(ctx, "eq", u, inf, u, exact)
    out = _select_where(ctx, "eq", u, one, y, out)
    return em.cast(out, ctx.out_dtype, h)


def _sign(ctx: OpCtx) -> Value:
    """`(x > 0) - (x < 0)`: 0 for zeros and NaN, as PyTorch."""
    x = ctx.em.cast(ctx.tensor("self"), ctx.out_dtype, ctx.hint)
    if x.dtype.kind == "b":
        return x
    zero = ctx.scalar(0, x.dtype)
    above, below = (ctx.em.cast(_compare(ctx, p, x, zero), x.dtype, ctx.hint)
                    for p in ("gt", "lt"))
    return ctx.em.binary("sub", above, below, ctx.hint)


def _gelu(ctx: OpCtx) -> Value:
    approximate = ctx.arg("approximate") or "none"
    if approximate not in ("none", "tanh"):
        raise ctx.fail(f"approximate='{approximate}' is not supported")
    return _unary("gelu", approximate=approximate)(ctx)


def _clamp(low_name: str, high_name: str) -> Translator:
    def translate(ctx: OpCtx) -> Value:
        low, high = ctx.arg(low_name), ctx.arg(high_name)
        if not all(v is None or isinstance(v, int | float) for v in (low, high)):
            raise ctx.fail("tensor bounds are not supported")
        x = ctx.tensor("self")
        if low is not None and high is not None and low > high:
            low = high  # PyTorch's result is then `max` everywhere
        if x.dtype.name not in FLOAT_DTYPES:
            # integers (relative-position buckets), in the result's type (a
            # float bound makes it float, as in PyTorch)
            if ctx.out_dtype.kind not in "iuf":
                raise ctx.fail(f"element type {x.dtype} is not supported")
            return _max_then_min(ctx, low, high)
        bounds = {k: float(v) for k, v in (("min", low), ("max", high)) if v is not None}
        return ctx.em.unary("clamp", x, ctx.hint, **bounds)

    return translate


_EXACT_BELOW = 2.0**23
"""Every float32 of at least this magnitude is an integer."""


def _rounding(direction: str) -> Translator:
    """`trunc`, `floor` and `ceil` of floats (no `nn` op): in float32, the
    value through int64 and back truncates it, then one step down (`floor`,
    where that passed above it) or up (`ceil`, where below it). A value of
    at least 2**23 in magnitude (and inf, NaN) is kept as it is: it is an
    integer already, and the int64 round trip would overflow. Integers are
    their own rounding."""

    def translate(ctx: OpCtx) -> Value:
        x = ctx.tensor("self")
        if x.dtype.name not in FLOAT_DTYPES:
            return x
        em, h, f32 = ctx.em, ctx.hint, np.dtype("float32")
        v = em.cast(x, f32, h)
        t = em.cast(em.cast(v, np.dtype("int64"), h), f32, h)
        if direction != "trunc":  # one step where the truncation passed the value
            passed = _compare(ctx, "gt" if direction == "floor" else "lt", t, v)
            t = em.binary("sub" if direction == "floor" else "add", t, em.cast(passed, f32, h), h)
        small = _compare(ctx, "lt", em.unary("abs", v, h), ctx.scalar(_EXACT_BELOW, f32))
        return em.cast(em.op("select", [small, t, v], v.shape, f32, hint=h), x.dtype, h)

    return translate


def _max_then_min(ctx: OpCtx, low: Any, high: Any) -> Val:
    """`min(max(x, low), high)` (either bound a tensor, a number or None),
    broadcast, in the result's type: max wins where the bounds cross."""
    dtype = ctx.out_dtype
    x = _operand(ctx, ctx.arg("self"), dtype)
    for bound, op in ((low, "max"), (high, "min")):
        if bound is not None:
            x = ctx.em.binary(op, x, _operand(ctx, bound, dtype), ctx.hint)
    return ctx.em.broadcast_to(x, ctx.out_shape, ctx.hint)


def _clamp_tensors(ctx: OpCtx) -> Value:
    """`clamp(x, min=t, max=u)` with tensor bounds: `_max_then_min`."""
    return _max_then_min(ctx, ctx.arg("min"), ctx.arg("max"))


def _cmp(predicate: str) -> Translator:
    def translate(ctx: OpCtx) -> Value:
        a_arg, b_arg = ctx.arg("self"), ctx.arg("other")
        a_dtype = ctx.as_val(a_arg).dtype
        b_dtype = ctx.as_val(b_arg).dtype if not isinstance(b_arg, int | float) else None
        dtype = a_dtype if b_dtype is None else np.result_type(a_dtype, b_dtype)
        if isinstance(b_arg, float) and not is_float(dtype):
            dtype = np.dtype("float32")
        # A number compared with a half tensor is rounded to its type first,
        # as PyTorch does (unlike arithmetic: `_binary`).
        a, b = _operand(ctx, a_arg, dtype), _operand(ctx, b_arg, dtype)
        return _compare(ctx, predicate, a, b)

    return translate


def _compare(ctx: OpCtx, predicate: str, a: Val, b: Val) -> Val:
    shape = np.broadcast_shapes(a.shape, b.shape)
    return ctx.em.op("cmp", [a, b], shape, np.dtype(bool), {"predicate": predicate}, ctx.hint)


def _isnan(ctx: OpCtx) -> Value:
    x = ctx.tensor("self")
    return _compare(ctx, "ne", x, x)


def _isinf(ctx: OpCtx) -> Value:
    x = ctx.tensor("self")
    magnitude = ctx.em.unary("abs", x, ctx.hint)
    return _compare(ctx, "eq", magnitude, ctx.scalar(math.inf, x.dtype))


def _where(ctx: OpCtx) -> Value:
    dtype = ctx.out_dtype
    cond = ctx.tensor("condition")
    a, b = _operand(ctx, ctx.arg("self"), dtype), _operand(ctx, ctx.arg("other"), dtype)
    return ctx.em.op("select", [cond, a, b], ctx.out_shape, dtype, hint=ctx.hint)


def _bool_operand(ctx: OpCtx, name: str) -> Val:
    x = ctx.tensor(name)
    if x.dtype.kind == "b":
        return x
    return _compare(ctx, "ne", x, ctx.scalar(0, x.dtype))


def _logical_not(ctx: OpCtx) -> Value:
    x = _bool_operand(ctx, "self")
    return _compare(ctx, "eq", x, ctx.scalar(False, x.dtype))


def _logical(is_and: bool) -> Translator:
    def translate(ctx: OpCtx) -> Value:
        return _bool_select(ctx, _bool_operand(ctx, "self"), _bool_operand(ctx, "other"), is_and)

    return translate


def _bool_select(ctx: OpCtx, a: Val, b: Val, is_and: bool) -> Val:
    """`a and b` as `select(a, b, false)`, `a or b` as `select(a, true, b)`
    (Boolean `a` and `b`, broadcast to the node's result)."""
    shape = ctx.out_shape
    a, b = ctx.em.broadcast_to(a, shape, ctx.hint), ctx.em.broadcast_to(b, shape, ctx.hint)
    fixed = ctx.em.broadcast_to(ctx.scalar(not is_and, a.dtype), shape, ctx.hint)
    branches = [b, fixed] if is_and else [fixed, b]
    return ctx.em.op("select", [a, *branches], shape, np.dtype(bool), hint=ctx.hint)


def _bitwise_bool(name: str) -> Translator:
    """`&`, `|`, `^` and `~` of boolean tensors (masks); integer bit
    operations have no `nn` op."""

    def translate(ctx: OpCtx) -> Value:
        operands = [ctx.arg("self")] + ([ctx.arg("other")] if name != "not" else [])
        if any(not isinstance(a, bool) and ctx.as_val(a).dtype.kind != "b" for a in operands):
            raise ctx.fail("bitwise operations on integers are not supported")
        if name == "not":
            return _logical_not(ctx)
        if name == "xor":
            a, b = _bool_operand(ctx, "self"), _operand(ctx, ctx.arg("other"), np.dtype(bool))
            return _compare(ctx, "ne", a, b)
        return _logical(is_and=name == "and")(ctx)

    return translate


def _any_all(reduction: str) -> Translator:
    def translate(ctx: OpCtx) -> Value:
        x = _bool_operand(ctx, "self")
        named = schema_args(ctx.node)
        dims = named.get("dim")
        dims = list(range(x.rank)) if dims is None else [dims] if isinstance(dims, int) else dims
        as_float = ctx.em.cast(x, np.dtype("float32"), ctx.hint)
        keepdim = bool(named.get("keepdim"))
        reduced = ctx.em.reduce(reduction, as_float, dims, keepdim, ctx.hint)
        return _compare(ctx, "gt", reduced, ctx.scalar(0.5, reduced.dtype))

    return translate


def _to_copy(ctx: OpCtx) -> Value:
    x = ctx.tensor("self")
    if ctx.out_dtype.kind == "b" and x.dtype.kind != "b":
        return _compare(ctx, "ne", x, ctx.scalar(0, x.dtype))
    return ctx.em.cast(x, ctx.out_dtype, ctx.hint)


def _identity(ctx: OpCtx) -> Value:
    return ctx.tensor("self")


def _full_like(ctx: OpCtx) -> Value:
    fill = ctx.arg("fill_value")
    if not isinstance(fill, bool | int | float):
        raise ctx.fail("a tensor fill value is not supported")
    return np.full(ctx.out_shape, fill, dtype=ctx.out_dtype)


TRANSLATORS: dict[Any, Translator] = {
    **{op: _binary("add") for op in (aten.add.Tensor, aten.add.Scalar)},
    **{op: _binary("sub") for op in (aten.sub.Tensor, aten.sub.Scalar)},
    **{op: _binary("mul") for op in (aten.mul.Tensor, aten.mul.Scalar)},
    **{op: _binary("div") for op in (aten.div.Tensor, aten.div.Scalar)},
    aten.maximum.default: _binary("max"),
    aten.minimum.default: _binary("min"),
    aten.pow.Tensor_Tensor: _binary("pow"),
    aten.pow.Tensor_Scalar: _binary("pow"),
    aten.pow.Scalar: _binary("pow"),
    aten.neg.default: _unary("neg", float_only=False),
    aten.abs.default: _unary("abs", float_only=False),
    aten.exp.default: _unary("exp"),
    aten.log.default: _unary("log"),
    aten.sqrt.default: _unary("sqrt"),
    aten.rsqrt.default: _unary("rsqrt"),
    aten.reciprocal.default: _unary("reciprocal"),
    aten.tanh.default: _unary("tanh"),
    aten.erf.default: _unary("erf"),
    aten.sin.default: _unary("sin"),
    aten.cos.default: _unary("cos"),
    aten.sigmoid.default: _unary("sigmoid"),
    aten.relu.default: _unary("relu"),
    aten.silu.default: _unary("silu"),
    aten.gelu.default: _gelu,
    aten.expm1.default: _expm1,
    aten.log1p.default: _log1p,
    aten.sign.default: _sign,
    aten.trunc.default: _rounding("trunc"),
    aten.floor.default: _rounding("floor"),
    aten.ceil.default: _rounding("ceil"),
    aten.hardtanh.default: _clamp("min_val", "max_val"),
    aten.clamp.default: _clamp("min", "max"),
    aten.clamp.Tensor: _clamp_tensors,
    **{getattr(aten, p).Tensor: _cmp(p) for p in ("eq", "ne", "lt", "le", "gt", "ge")},
    **{getattr(aten, p).Scalar: _cmp(p) for p in ("eq", "ne", "lt", "le", "gt", "ge")},
    aten.isnan.default: _isnan,
    aten.isinf.default: _isinf,
    aten.where.self: _where,
    aten.logical_not.default: _logical_not,
    aten.logical_and.default: _logical(is_and=True),
    aten.logical_or.default: _logical(is_and=False),
    aten.bitwise_and.Tensor: _bitwise_bool("and"),
    aten.bitwise_or.Tensor: _bitwise_bool("or"),
    aten.bitwise_xor.Tensor: _bitwise_bool("xor"),
    aten.bitwise_not.default: _bitwise_bool("not"),
    aten.any.dim: _any_all("max"),
    aten.any.dims: _any_all("max"),
    aten.any.default: _any_all("max"),
    aten.all.dim: _any_all("min"),
    aten.all.default: _any_all("min"),
    aten._to_copy.default: _to_copy,
    aten.clone.default: _identity,
    aten.alias.default: _identity,
    aten.lift_fresh_copy.default: _identity,
    aten.detach.default: _identity,
    aten.full_like.default: _full_like,
}
"""ATen overload -> its translator (elementwise part of the table)."""
