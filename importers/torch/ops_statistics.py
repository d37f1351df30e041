"""ATen reductions that reach fusec whole and are written from several `nn`
ops: the variance and the vector norm.

PyTorch's core decompositions leave `aten.var.correction` (`x.var(dim)`,
`torch.var_mean`'s variance) and `aten.linalg_vector_norm` (`x.norm()`,
`F.normalize`) as they are. Both are translated as PyTorch computes them:
half-precision inputs in float32 (PyTorch's accumulation type), rounded to
the result type once at the end.

```mlir
// x.var(dim=-1, keepdim=True), x: tensor<4x8xf32>
%m = nn.reduce_mean %x {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
%d = nn.sub %x, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
%q = nn.mul %d, %d : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
%s = nn.reduce_sum %q {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
%v = nn.div %s, %n : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>   // %n = 7.0
```
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from fusec.dialects import shapes
from fusec.importers.onnx.emit import FLOAT_DTYPES, Val
from fusec.importers.torch.context import OpCtx, Translator, Value

aten = torch.ops.aten

_F32 = np.dtype("float32")


def _compute_input(ctx: OpCtx) -> tuple[Val, list[int], bool]:
    """The input in its compute type (halves widened to f32, as PyTorch
    accumulates them), the reduced axes, normalized (all for `dim=None` or
    `[]`), and `keepdim`. A rank-0 input is one element along one axis."""
    x = ctx.tensor("self")
    if x.dtype.name not in FLOAT_DTYPES:
        raise ctx.fail(f"element type {x.dtype} is not supported (floats only)")
    if x.dtype.itemsize == 2:
        x = ctx.em.cast(x, _F32, ctx.hint)
    if x.rank == 0:
        return ctx.em.reshape(x, (1,), ctx.hint), [0], False
    dims = ctx.arg("dim")
    dims = [dims] if isinstance(dims, int) else list(dims or [])
    axes = list(shapes.normalize_axes(dims or range(x.rank), x.rank))
    return x, axes, bool(ctx.arg("keepdim"))


def _var(ctx: OpCtx) -> Value:
    """`sum((x - mean(x))^2) / max(N - correction, 0)` over `dim`
    (correction 1 when omitted: Bessel's, as PyTorch)."""
    x, axes, keep = _compute_input(ctx)
    correction = ctx.arg("correction")
    correction = 1.0 if correction is None else float(correction)
    count = math.prod(x.shape[a] for a in axes)
    mean = ctx.em.reduce("mean", x, axes, True, ctx.hint)
    deviation = ctx.em.binary("sub", x, mean, ctx.hint)
    square = ctx.em.binary("mul", deviation, deviation, ctx.hint)
    total = ctx.em.reduce("sum", square, axes, keep, ctx.hint)
    # PyTorch divides by N - correction clamped at 0: a sum over too few
    # elements gives inf (or NaN for 0 / 0), as there
    divisor = ctx.scalar(max(count - correction, 0.0), x.dtype)
    return ctx.em.cast(ctx.em.binary("div", total, divisor, ctx.hint), ctx.out_dtype, ctx.hint)


def _vector_norm(ctx: OpCtx) -> Value:
    """`sum(|x|^ord)^(1/ord)` over `dim`: ord 2 as `sqrt(sum(x*x))`, 1 as
    `sum(|x|)`, +-inf as the max/min of `|x|`, 0 as the count of nonzeros,
    any other ord through `nn.pow`."""
    order = ctx.arg("ord")
    if not isinstance(order, int | float) or isinstance(order, bool):
        raise ctx.fail(f"ord={order!r} is not supported (a number only)")
    if ctx.arg("dtype") is not None:
        raise ctx.fail("a dtype argument is not supported")
    x, axes, keep = _compute_input(ctx)
    hint = ctx.hint
    order = float(order)
    if order == 2.0:
        square = ctx.em.binary("mul", x, x, hint)
        norm = ctx.em.unary("sqrt", ctx.em.reduce("sum", square, axes, keep, hint), hint)
    elif order == 0.0:
        nonzero = ctx.em.op("cmp", [x, ctx.scalar(0.0, x.dtype)], x.shape, np.dtype(bool),
                            {"predicate": "ne"}, hint)
        norm = ctx.em.reduce("sum", ctx.em.cast(nonzero, x.dtype, hint), axes, keep, hint)
    else:
        magnitude = ctx.em.unary("abs", x, hint)
        if math.isinf(order):
            if any(x.shape[a] == 0 for a in axes):
                raise ctx.fail("the infinity norm of no elements is undefined")
            norm = ctx.em.reduce("max" if order > 0 else "min", magnitude, axes, keep, hint)
        elif order == 1.0:
            norm = ctx.em.reduce("sum", magnitude, axes, keep, hint)
        else:
            powered = ctx.em.binary("pow", magnitude, ctx.scalar(order, x.dtype), hint)
            total = ctx.em.reduce("sum", powered, axes, keep, hint)
            norm = ctx.em.binary("pow", total, ctx.scalar(1.0 / order, x.dtype), hint)
    return ctx.em.cast(norm, ctx.out_dtype, hint)


TRANSLATORS: dict[Any, Translator] = {
    aten.var.correction: _var,
    aten.linalg_vector_norm.default: _vector_norm,
}
"""ATen overload -> its translator (the reductions written from several ops)."""
