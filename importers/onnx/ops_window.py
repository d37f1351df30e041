"""Window ONNX ops: Conv, MaxPool, AveragePool (1-D and 2-D).

`nn` has 2-D windows only; a 1-D window is run as a 2-D one of height 1
(reshapes around it). ONNX's `auto_pad`, `ceil_mode` and
`count_include_pad` become explicit pads and, for the last, a constant
correction factor, all computed at import time.

```mlir
// Conv(x, w, b) {pads = [1, 1, 1, 1]} with x: 1x3x8x8, w: 4x3x3x3
%c = nn.conv2d %x, %w {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1}
    : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
%b2 = nn.reshape %b : (tensor<4xf32>) -> tensor<1x4x1x1xf32>
%y = nn.add %c, %b2 : (tensor<1x4x8x8xf32>, tensor<1x4x1x1xf32>) -> tensor<1x4x8x8xf32>
```
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fusec.dialects import shapes
from fusec.importers.onnx.context import Handler, NodeCtx, Value
from fusec.importers.onnx.emit import FLOAT_DTYPES, Val


@dataclass
class Window:
    """Per spatial dimension: kernel, stride, dilation, begin and end pads."""

    kernel: list[int]
    strides: list[int]
    dilations: list[int]
    begin: list[int]
    end: list[int]

    def lifted(self) -> Window:
        """The 1-D window as a 2-D one of height 1."""
        return Window([1, *self.kernel], [1, *self.strides], [1, *self.dilations],
                      [0, *self.begin], [0, *self.end])

    def attrs(self) -> dict[str, object]:
        """`nn` attributes; pads are [top, left, bottom, right]."""
        return {"strides": self.strides, "pads": [*self.begin, *self.end]}


def _window(ctx: NodeCtx, spatial: tuple[int, ...], kernel: list[int]) -> Window:
    """Strides, dilations and pads from the attributes, `auto_pad` resolved."""
    n = len(spatial)
    strides = [int(s) for s in ctx.attr("strides", [1] * n)]
    dilations = [int(d) for d in ctx.attr("dilations", [1] * n)]
    pads = [int(p) for p in ctx.attr("pads", [0] * (2 * n))]
    if len(kernel) != n or len(strides) != n or len(dilations) != n or len(pads) != 2 * n:
        raise ctx.fail(f"kernel, strides, dilations or pads do not match {n} spatial dims")
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad == "VALID":
        pads = [0] * (2 * n)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * (2 * n)
        for i in range(n):
            out = -(-spatial[i] // strides[i])
            span = (kernel[i] - 1) * dilations[i] + 1
            total = max(0, (out - 1) * strides[i] + span - spatial[i])
            small = total // 2
            pads[i] = small if auto_pad == "SAME_UPPER" else total - small
            pads[n + i] = total - pads[i]
    elif auto_pad != "NOTSET":
        raise ctx.fail(f"auto_pad '{auto_pad}' is not supported")
    return Window(kernel, strides, dilations, pads[:n], pads[n:])


def _lift(ctx: NodeCtx, x: Val) -> Val:
    """NCL -> NC1L for 1-D windows; NCHW stays; other ranks are refused."""
    if x.rank == 3:
        return ctx.em.reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]), ctx.hint)
    if x.rank != 4:
        raise ctx.fail(f"only 1-D and 2-D windows are supported (input shape {list(x.shape)})")
    return x


def _conv(ctx: NodeCtx) -> Value:
    ctx.only_attrs(("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"))
    x, w = ctx.tensor(0), ctx.tensor(1)
    ctx.expect_dtype(x, FLOAT_DTYPES, "nn.conv2d takes floating-point elements")
    kernel = [int(k) for k in ctx.attr("kernel_shape", w.shape[2:])]
    if tuple(kernel) != w.shape[2:]:
        raise ctx.fail(f"kernel_shape {kernel} differs from the weight shape {list(w.shape)}")
    window = _window(ctx, x.shape[2:], kernel)
    one_d = x.rank == 3
    if one_d:
        window = window.lifted()
        w = ctx.em.reshape(w, (w.shape[0], w.shape[1], 1, w.shape[2]), ctx.hint)
    x4 = _lift(ctx, x)
    group = int(ctx.attr("group", 1))
    pads = [*window.begin, *window.end]
    attrs = {**window.attrs(), "dilations": window.dilations, "groups": group}
    try:
        out = shapes.conv2d_shape(x4.shape, w.shape, window.strides, pads, window.dilations, group)
    except shapes.ShapeError as err:
        raise ctx.fail(str(err)) from None
    y = ctx.em.op("conv2d", [x4, w], out, x.dtype, attrs, ctx.hint)
    if ctx.has(2):
        bias = ctx.em.reshape(ctx.tensor(2), (1, out[1], 1, 1), ctx.hint)
        y = ctx.em.binary("add", y, bias, ctx.hint)
    return ctx.em.reshape(y, (out[0], out[1], out[3]), ctx.hint) if one_d else y


def _pool_geometry(ctx: NodeCtx, x4: Val, window: Window) -> list[int]:
    """Output sizes; with `ceil_mode` the end pads grow to cover the last window."""
    ceil = bool(ctx.attr("ceil_mode", 0))
    outs: list[int] = []
    for i in range(2):
        size, k, s = x4.shape[2 + i], window.kernel[i], window.strides[i]
        padded = size + window.begin[i] + window.end[i]
        out = -(-(padded - k) // s) + 1 if ceil else (padded - k) // s + 1
        # ONNX drops a last window that would start inside the end padding.
        if ceil and (out - 1) * s >= size + window.begin[i]:
            out -= 1
        window.end[i] += max(0, (out - 1) * s + k - padded)
        outs.append(out)
    if min(outs) < 1:
        raise ctx.fail(f"the window {window.kernel} does not fit input {list(x4.shape)}")
    if any(p >= k for p, k in zip(window.begin + window.end, window.kernel * 2, strict=True)):
        raise ctx.fail(f"pads {window.begin + window.end} as large as the window "
                       f"{window.kernel} are not supported")
    return outs


def _pool(nn_name: str) -> Handler:
    def handle(ctx: NodeCtx) -> Value:
        known = ["auto_pad", "ceil_mode", "kernel_shape", "pads", "strides", "dilations"]
        ctx.only_attrs([*known, "storage_order", "count_include_pad"])
        if len([o for o in ctx.node.output if o]) > 1:
            raise ctx.fail("the Indices output is not supported")
        x = ctx.tensor(0)
        ctx.expect_dtype(x, FLOAT_DTYPES, f"nn.{nn_name} takes floating-point elements")
        kernel = [int(k) for k in ctx.attr("kernel_shape", [])]
        window = _window(ctx, x.shape[2:], kernel)
        if any(d != 1 for d in window.dilations):
            raise ctx.fail(f"dilations {window.dilations} are not supported")
        one_d = x.rank == 3
        window = window.lifted() if one_d else window
        x4 = _lift(ctx, x)
        explicit = (list(window.begin), list(window.end))
        oh, ow = _pool_geometry(ctx, x4, window)
        attrs = {"kernel": window.kernel, **window.attrs()}
        y = ctx.em.op(nn_name, [x4], (*x4.shape[:2], oh, ow), x.dtype, attrs, ctx.hint)
        if nn_name == "avg_pool2d" and ctx.attr("count_include_pad", 0):
            factor = _include_pad_factor(x4.shape[2:], window, explicit, (oh, ow))
            y = ctx.em.binary("mul", y, ctx.constant(factor.astype(x.dtype), "cnt"), ctx.hint)
        return ctx.em.reshape(y, (*x.shape[:2], ow), ctx.hint) if one_d else y

    return handle


def _include_pad_factor(
    size: tuple[int, ...], window: Window, explicit: tuple[list[int], list[int]],
    out: tuple[int, int],
) -> np.ndarray:
    """`nn.avg_pool2d` divides by the real positions in a window; ONNX's
    `count_include_pad` divides by those inside the explicitly padded input.
    The ratio per output position, as an `OH x OW` array."""
    factors = []
    for i in range(2):
        start = np.arange(out[i]) * window.strides[i] - window.begin[i]
        stop = start + window.kernel[i]
        real = np.minimum(stop, size[i]) - np.maximum(start, 0)
        padded = np.minimum(stop, size[i] + explicit[1][i]) - np.maximum(start, -explicit[0][i])
        factors.append(real / padded)
    return np.outer(factors[0], factors[1])


def _global_pool(nn_name: str) -> Handler:
    def handle(ctx: NodeCtx) -> Value:
        ctx.only_attrs(())
        x = ctx.tensor(0)
        ctx.expect_dtype(x, FLOAT_DTYPES, "global pooling takes floating-point elements")
        return ctx.em.reduce(nn_name, x, list(range(2, x.rank)), True, ctx.hint)

    return handle


HANDLERS: dict[str, Handler] = {
    "Conv": _conv,
    "MaxPool": _pool("max_pool2d"),
    "AveragePool": _pool("avg_pool2d"),
    "GlobalAveragePool": _global_pool("mean"),
    "GlobalMaxPool": _global_pool("max"),
}
"""Window ONNX op type -> handler."""
