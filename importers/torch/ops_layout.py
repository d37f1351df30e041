"""ATen view and layout ops -> `nn.reshape`, `nn.transpose`, `nn.broadcast_to`,
`nn.slice`, `nn.concat`.

Shapes are static, so every view's result shape is read off the traced
result (`-1` entries of `view`/`expand` need no arithmetic here). Results
are fresh tensors: the graphs fusec receives are functional (aot_autograd
and torch.export remove mutation and aliasing).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import fx

from fusec.dialects import shapes
from fusec.importers.onnx.emit import Val
from fusec.importers.torch.context import OpCtx, Translator, Value

aten = torch.ops.aten


def _reshape(ctx: OpCtx) -> Value:
    return ctx.em.reshape(ctx.tensor("self"), ctx.out_shape, ctx.hint)


def _permute(ctx: OpCtx) -> Value:
    x = ctx.tensor("self")
    perm = [shapes.normalize_axis(int(d), x.rank) for d in ctx.arg("dims")]
    return ctx.em.transpose(x, perm, ctx.hint)


def _transpose(ctx: OpCtx) -> Value:
    x = ctx.tensor("self")
    perm = list(range(x.rank))
    a, b = (shapes.normalize_axis(int(ctx.arg(n)), x.rank) for n in ("dim0", "dim1"))
    perm[a], perm[b] = perm[b], perm[a]
    return ctx.em.transpose(x, perm, ctx.hint)


def _t(ctx: OpCtx) -> Value:
    x = ctx.tensor("self")
    return ctx.em.transpose(x, list(range(x.rank))[::-1], ctx.hint)


def _expand(ctx: OpCtx) -> Value:
    return ctx.em.broadcast_to(ctx.tensor("self"), ctx.out_shape, ctx.hint)


def _slice(x: Val, ctx: OpCtx, dim: int, start: int, end: int, step: int) -> Val:
    starts, limits, strides = [0] * x.rank, list(x.shape), [1] * x.rank
    starts[dim], limits[dim], strides[dim] = start, end, step
    if (start, end, step) == (0, x.shape[dim], 1):
        return x
    attrs = {"starts": starts, "limits": limits, "strides": strides}
    out = shapes.slice_shape(x.shape, starts, limits, strides)
    return ctx.em.op("slice", [x], out, x.dtype, attrs, ctx.hint)


def _bounds(size: int, start: Any, end: Any, step: int) -> tuple[int, int]:
    """Python slice bounds of one dimension, clamped as PyTorch does."""
    begin, stop, _ = slice(start, end, step).indices(size)
    return begin, max(stop, begin)


def _slice_tensor(ctx: OpCtx) -> Value:
    x = ctx.tensor("self")
    dim = shapes.normalize_axis(int(ctx.arg("dim")), x.rank)
    step = int(ctx.arg("step") or 1)
    if step < 1:
        raise ctx.fail(f"slice step {step} is not supported")
    start, end = _bounds(x.shape[dim], ctx.arg("start"), ctx.arg("end"), step)
    return _slice(x, ctx, dim, start, end, step)


def _select(ctx: OpCtx) -> Value:
    x = ctx.tensor("self")
    dim = shapes.normalize_axis(int(ctx.arg("dim")), x.rank)
    index = int(ctx.arg("index")) % x.shape[dim]
    picked = _slice(x, ctx, dim, index, index + 1, 1)
    return ctx.em.reshape(picked, ctx.out_shape, ctx.hint)


def _split(ctx: OpCtx) -> Value:
    x = ctx.tensor("self")
    dim = shapes.normalize_axis(int(ctx.arg("dim")), x.rank)
    outputs, start = [], 0
    for piece in ctx.node.meta["val"]:
        size = int(piece.shape[dim])
        outputs.append(_slice(x, ctx, dim, start, start + size, 1))
        start += size
    return tuple(outputs)


def _cat(ctx: OpCtx) -> Value:
    dtype = ctx.out_dtype
    parts = [ctx.em.cast(ctx.as_val(t), dtype, ctx.hint) for t in ctx.arg("tensors")]
    parts = [p for p in parts if p.shape != (0,)]  # torch.cat skips empty 1-d tensors
    axis = shapes.normalize_axis(int(ctx.arg("dim")), parts[0].rank)
    if len(parts) == 1:
        return parts[0]
    return ctx.em.op("concat", parts, ctx.out_shape, dtype, {"axis": axis}, ctx.hint)


def _slice_scatter(ctx: OpCtx) -> Value:
    """`x[..., start:end] = src` made functional (`slice_scatter`): the
    parts of `x` around the slice and `src` concatenated along `dim`."""
    x = ctx.tensor("self")
    dim = shapes.normalize_axis(int(ctx.arg("dim") or 0), x.rank)
    step = int(ctx.arg("step") or 1)
    if step != 1:
        raise ctx.fail(f"a scatter into a slice of step {step} is not supported")
    start, end = _bounds(x.shape[dim], ctx.arg("start"), ctx.arg("end"), step)
    src = ctx.em.cast(ctx.tensor("src"), x.dtype, ctx.hint)
    parts = [*([_slice(x, ctx, dim, 0, start, 1)] if start > 0 else []), src,
             *([_slice(x, ctx, dim, end, x.shape[dim], 1)] if end < x.shape[dim] else [])]
    if len(parts) == 1:
        return parts[0]
    return ctx.em.op("concat", parts, x.shape, x.dtype, {"axis": dim}, ctx.hint)


def _copy(ctx: OpCtx) -> Value:
    """`aten.copy(x, src)` (an in-place copy made functional): `src` in
    `x`'s type and shape."""
    x = ctx.tensor("self")
    src = ctx.em.cast(ctx.tensor("src"), x.dtype, ctx.hint)
    return ctx.em.broadcast_to(src, x.shape, ctx.hint)


def _constant_pad(ctx: OpCtx) -> Value:
    """`F.pad(x, pad, value=v)`: per padded dimension (`pad` lists the last
    one's before and after first) a `nn.concat` of broadcast constants
    around `x`, a negative pad a `nn.slice`."""
    x = ctx.tensor("self")
    pad = [int(p) for p in ctx.arg("pad")]
    value = ctx.arg("value")
    value = 0 if value is None else value
    if len(pad) % 2 or len(pad) > 2 * x.rank:
        raise ctx.fail(f"a pad of {len(pad)} entries for a rank-{x.rank} tensor")
    fill = ctx.scalar(value, x.dtype)
    for k in range(len(pad) // 2):
        dim, before, after = x.rank - 1 - k, pad[2 * k], pad[2 * k + 1]
        if before < 0 or after < 0:
            x = _slice(x, ctx, dim, max(-before, 0), x.shape[dim] - max(-after, 0), 1)
            before, after = max(before, 0), max(after, 0)
        parts = []
        for size in (before, None, after):
            if size is None:
                parts.append(x)
            elif size > 0:
                shape = list(x.shape)
                shape[dim] = size
                parts.append(ctx.em.broadcast_to(fill, shape, ctx.hint))
        if len(parts) > 1:
            shape = list(x.shape)
            shape[dim] += before + after
            x = ctx.em.op("concat", parts, tuple(shape), x.dtype, {"axis": dim}, ctx.hint)
    return x


def _as_strided(ctx: OpCtx) -> Value:
    """`as_strided` of a contiguous tensor with contiguous strides (what
    PyTorch's own decompositions write for a reshape, e.g. group norm's
    per-channel scale): the elements from `storage_offset` on, reshaped."""
    source = ctx.node.args[0]
    meta = source.meta.get("val") if isinstance(source, fx.Node) else None
    size = [int(d) for d in ctx.arg("size")]
    stride = [int(d) for d in ctx.arg("stride")]
    offset = int(ctx.arg("storage_offset") or 0)
    if not isinstance(meta, torch.Tensor) or not meta.is_contiguous() or meta.storage_offset():
        raise ctx.fail("a view of a tensor that is not contiguous is not supported")
    dense = [math.prod(size[d + 1:]) for d in range(len(size))]
    if any(n != 1 and s != t for n, s, t in zip(size, stride, dense, strict=True)):
        raise ctx.fail(f"strides {stride} other than contiguous ones are not supported")
    x = ctx.tensor("self")
    total, count = math.prod(x.shape), math.prod(size)
    if offset + count > total:
        raise ctx.fail("a view past the end of its tensor")
    flat = ctx.em.reshape(x, (total,), ctx.hint)
    return ctx.em.reshape(_slice(flat, ctx, 0, offset, offset + count, 1), size, ctx.hint)


TRANSLATORS: dict[Any, Translator] = {
    aten.view.default: _reshape,
    aten._unsafe_view.default: _reshape,
    aten.reshape.default: _reshape,
    aten.unsqueeze.default: _reshape,
    aten.squeeze.dim: _reshape,
    aten.squeeze.dims: _reshape,
    aten.squeeze.default: _reshape,
    aten.permute.default: _permute,
    aten.transpose.int: _transpose,
    aten.t.default: _t,
    aten.expand.default: _expand,
    aten.slice.Tensor: _slice_tensor,
    aten.select.int: _select,
    aten.split_with_sizes.default: _split,
    aten.split.Tensor: _split,
    aten.cat.default: _cat,
    aten.as_strided.default: _as_strided,
    aten.constant_pad_nd.default: _constant_pad,
    aten.slice_scatter.default: _slice_scatter,
    aten.copy.default: _copy,
}
"""ATen overload -> its translator (layout part of the table)."""
