"""Neural-network ONNX ops: Softmax, LogSoftmax, LayerNormalization,
BatchNormalization, MatMul, Gemm and the reductions.

```mlir
// Gemm(a, b, c) {transB = 1, alpha = 0.5}
%bt = nn.transpose %b {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
%ab = nn.matmul %a, %bt : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
%s = nn.mul %ab, %alpha : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
%y = nn.add %s, %c : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
```
"""

from __future__ import annotations

import numpy as np

from fusec.dialects import shapes
from fusec.importers.onnx.context import Handler, NodeCtx, Value, axis_of
from fusec.importers.onnx.emit import FLOAT_DTYPES, INT_DTYPES, Val


def _softmax(nn_name: str) -> Handler:
    def handle(ctx: NodeCtx) -> Value:
        ctx.only_attrs(("axis",))
        x = ctx.tensor(0)
        ctx.expect_dtype(x, FLOAT_DTYPES, f"nn.{nn_name} takes floating-point elements")
        if ctx.opset >= 13:
            axis = axis_of(ctx, int(ctx.attr("axis", -1)), x.rank)
            return ctx.em.unary(nn_name, x, ctx.hint, axis=axis)
        # Before opset 13 the input is seen as 2-D, [prod(:axis), prod(axis:)].
        axis = axis_of(ctx, int(ctx.attr("axis", 1)), x.rank)
        flat = (shapes.numel(x.shape[:axis]), shapes.numel(x.shape[axis:]))
        y = ctx.em.unary(nn_name, ctx.em.reshape(x, flat, ctx.hint), ctx.hint, axis=1)
        return ctx.em.reshape(y, x.shape, ctx.hint)

    return handle


def _layer_norm(ctx: NodeCtx) -> list[Value]:
    """`nn.layer_norm`; the optional Mean and InvStdDev outputs are computed
    beside it with reductions."""
    ctx.only_attrs(("axis", "epsilon", "stash_type"))
    x = ctx.tensor(0)
    ctx.expect_dtype(x, FLOAT_DTYPES, "nn.layer_norm takes floating-point elements")
    axis = axis_of(ctx, int(ctx.attr("axis", -1)), x.rank)
    eps = float(ctx.attr("epsilon", 1e-5))
    param = x.shape[axis:]
    scale = _param(ctx, ctx.tensor(1), param)
    bias = _param(ctx, ctx.tensor(2), param) if ctx.has(2) else ctx.constant(
        np.zeros(param, x.dtype), "zeros")
    attrs = {"axis": axis, "epsilon": eps}
    y = ctx.em.op("layer_norm", [x, scale, bias], x.shape, x.dtype, attrs, ctx.hint)
    outputs: list[Value] = [y]
    wanted = [o != "" for o in ctx.node.output[1:3]]
    if any(wanted):
        axes = list(range(axis, x.rank))
        mean = ctx.em.reduce("mean", x, axes, True, ctx.hint)
        centered = ctx.em.binary("sub", x, mean, ctx.hint)
        square = ctx.em.binary("mul", centered, centered, ctx.hint)
        var = ctx.em.reduce("mean", square, axes, True, ctx.hint)
        shifted = ctx.em.binary("add", var, ctx.scalar(eps, x), ctx.hint)
        outputs += [mean, ctx.em.unary("rsqrt", shifted, ctx.hint)][: len(wanted)]
    return outputs


def _param(ctx: NodeCtx, p: Val, shape: tuple[int, ...]) -> Val:
    """ONNX lets scale and bias broadcast; `nn.layer_norm` wants them whole."""
    extra = len(p.shape) - len(shape)
    if extra > 0 and all(d == 1 for d in p.shape[:extra]):
        p = ctx.em.reshape(p, p.shape[extra:], ctx.hint)
    try:
        fits = shapes.broadcast_shapes(p.shape, shape) == shape
    except shapes.ShapeError:
        fits = False
    if not fits:
        raise ctx.fail(f"scale/bias shape {list(p.shape)} does not broadcast to {list(shape)}")
    return ctx.em.broadcast_to(p, shape, ctx.hint)


def _batch_norm(ctx: NodeCtx) -> Value:
    ctx.only_attrs(("epsilon", "momentum", "training_mode", "spatial"))
    if ctx.attr("training_mode", 0):
        raise ctx.fail("training_mode = 1 is not supported (inference only)")
    if len([o for o in ctx.node.output if o]) > 1:
        raise ctx.fail("the running-statistics outputs (training) are not supported")
    x = ctx.tensor(0)
    ctx.expect_dtype(x, FLOAT_DTYPES, "nn.batch_norm takes floating-point elements")
    if x.rank < 2:
        raise ctx.fail(f"input must have rank >= 2 (N, C, ...), got {list(x.shape)}")
    params = [ctx.em.cast(ctx.tensor(i), x.dtype, ctx.hint) for i in range(1, 5)]
    attrs = {"epsilon": float(ctx.attr("epsilon", 1e-5))}
    return ctx.em.op("batch_norm", [x, *params], x.shape, x.dtype, attrs, ctx.hint)


def _matmul(ctx: NodeCtx) -> Value:
    """`nn.matmul`; rank-1 operands are promoted and the unit dimension
    removed afterwards, as NumPy `matmul` does."""
    ctx.only_attrs(())
    a, b = ctx.tensor(0), ctx.tensor(1)
    ctx.expect_dtype(a, FLOAT_DTYPES, "nn.matmul takes floating-point elements")
    if a.rank == 0 or b.rank == 0:
        raise ctx.fail("MatMul of a scalar is not defined")
    a2 = ctx.em.reshape(a, (1, a.shape[0]), ctx.hint) if a.rank == 1 else a
    b2 = ctx.em.reshape(b, (b.shape[0], 1), ctx.hint) if b.rank == 1 else b
    try:
        out = shapes.matmul_shape(a2.shape, b2.shape)
    except shapes.ShapeError as err:
        raise ctx.fail(str(err)) from None
    y = ctx.em.op("matmul", [a2, b2], out, a.dtype, hint=ctx.hint)
    final = list(out)
    if b.rank == 1:
        final.pop(-1)
    if a.rank == 1:
        final.pop(-1 if b.rank == 1 else -2)
    return ctx.em.reshape(y, final, ctx.hint)


def _gemm(ctx: NodeCtx) -> Value:
    ctx.only_attrs(("alpha", "beta", "transA", "transB"))
    a = _operand_2d(ctx, 0, bool(ctx.attr("transA", 0)))
    b = _operand_2d(ctx, 1, bool(ctx.attr("transB", 0)))
    ctx.expect_dtype(a, FLOAT_DTYPES, "nn.matmul takes floating-point elements")
    if a.shape[1] != b.shape[0]:
        raise ctx.fail(f"A' {list(a.shape)} and B' {list(b.shape)} do not contract")
    y = ctx.em.op("matmul", [a, b], (a.shape[0], b.shape[1]), a.dtype, hint=ctx.hint)
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    if alpha != 1.0:
        y = ctx.em.binary("mul", y, ctx.scalar(alpha, y), ctx.hint)
    if ctx.has(2) and beta != 0.0:
        c = ctx.tensor(2)
        if beta != 1.0:
            c = ctx.em.binary("mul", c, ctx.scalar(beta, c), ctx.hint)
        if shapes.broadcast_shapes(y.shape, c.shape) != y.shape:
            raise ctx.fail(f"C {list(c.shape)} does not broadcast to {list(y.shape)}")
        y = ctx.em.binary("add", y, c, ctx.hint)
    return y


def _operand_2d(ctx: NodeCtx, index: int, transposed: bool) -> Val:
    """A Gemm operand, transposed if asked: at import time for a constant
    weight (so no kernel transposes it), with `nn.transpose` otherwise."""
    value = ctx.value(index)
    if len(value.shape) != 2:
        raise ctx.fail(f"input #{index} must be 2-D, got shape {list(value.shape)}")
    if not transposed:
        return ctx.tensor(index)
    if isinstance(value, np.ndarray):
        return ctx.constant(np.ascontiguousarray(value.T), ctx.node.input[index] + "_t")
    return ctx.em.transpose(value, [1, 0], ctx.hint)


def _reduce(nn_name: str, allowed: frozenset[str]) -> Handler:
    def handle(ctx: NodeCtx) -> Value:
        ctx.only_attrs(("axes", "keepdims", "noop_with_empty_axes"))
        x = ctx.tensor(0)
        kinds = "floating-point" if allowed == FLOAT_DTYPES else "numeric"
        if not (x.dtype.kind == "b" and nn_name in ("max", "min")):
            ctx.expect_dtype(x, allowed, f"nn.reduce_{nn_name} takes {kinds} elements")
        # Axes are an input from opset 18 (ReduceSum: 13), an attribute before.
        axes = _axes(ctx)
        keepdims = bool(ctx.attr("keepdims", 1))
        if not axes:
            if ctx.attr("noop_with_empty_axes", 0):
                return x
            axes = list(range(x.rank))
        if x.rank == 0:
            return x
        norm = [axis_of(ctx, a, x.rank) for a in axes]
        if any(x.shape[a] == 0 for a in norm):
            return _empty_reduction(ctx, nn_name, x, norm, keepdims)
        if x.dtype.kind == "b" and nn_name in ("max", "min"):
            # Any / all of a mask: reduce it as 0/1 integers.
            as_int = ctx.em.cast(x, np.dtype(np.int32), ctx.hint)
            reduced = ctx.em.reduce(nn_name, as_int, norm, keepdims, ctx.hint)
            return ctx.em.cast(reduced, x.dtype, ctx.hint)
        return ctx.em.reduce(nn_name, x, norm, keepdims, ctx.hint)

    return handle


def _empty_reduction(
    ctx: NodeCtx, nn_name: str, x: Val, axes: list[int], keepdims: bool
) -> np.ndarray:
    """Reducing an empty dimension gives the reduction's identity, whatever
    the data: a constant (ONNX: 0 for sum, -inf for max, +inf for min)."""
    shape = shapes.reduced_shape(x.shape, sorted(set(axes)), keepdims)
    if x.dtype.kind == "b":
        return np.full(shape, nn_name == "min", dtype=bool)
    info = np.finfo(x.dtype) if x.dtype.kind == "f" else np.iinfo(x.dtype)
    lowest, highest = (-np.inf, np.inf) if x.dtype.kind == "f" else (info.min, info.max)
    fill = {"sum": 0, "max": lowest, "min": highest}.get(nn_name)
    if fill is None:
        raise ctx.fail(f"the mean of an empty dimension of {list(x.shape)} is undefined")
    return np.full(shape, fill, dtype=x.dtype)


def _axes(ctx: NodeCtx) -> list[int]:
    if ctx.has(1):
        return ctx.const_ints(1, "axes")
    return [int(a) for a in ctx.attr("axes", [])]


NUMERIC = FLOAT_DTYPES | INT_DTYPES

HANDLERS: dict[str, Handler] = {
    "Softmax": _softmax("softmax"),
    "LogSoftmax": _softmax("log_softmax"),
    "LayerNormalization": _layer_norm,
    "BatchNormalization": _batch_norm,
    "MatMul": _matmul,
    "Gemm": _gemm,
    "ReduceSum": _reduce("sum", NUMERIC),
    "ReduceMean": _reduce("mean", FLOAT_DTYPES),
    "ReduceMax": _reduce("max", NUMERIC),
    "ReduceMin": _reduce("min", NUMERIC),
}
"""NN ONNX op type -> handler."""
