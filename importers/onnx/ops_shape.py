"""Layout and shape ONNX ops: Transpose, Reshape, Flatten, Squeeze, Unsqueeze,
Expand, Concat, Slice, Split, Gather, GatherND, Trilu, and the shape arithmetic
(`Shape`, `Size`, `Constant`, `ConstantOfShape`) that exporters emit.

Shapes are static, so `Shape` of an emitted value is a constant, and chains
such as `Shape -> Gather -> Unsqueeze -> Concat -> Reshape` fold at import:
only the final `nn.reshape` is emitted.

```mlir
// Reshape(x, [0, -1]) with x: 2x3x4
%y = nn.reshape %x : (tensor<2x3x4xf32>) -> tensor<2x12xf32>
```
"""

from __future__ import annotations

import math

import numpy as np

from fusec.dialects import shapes
from fusec.importers.onnx.context import Handler, NodeCtx, Value, axis_of
from fusec.importers.onnx.emit import Val
from fusec.importers.onnx.loader import tensor_to_array


def _transpose(ctx: NodeCtx) -> Value:
    ctx.only_attrs(("perm",))
    x = ctx.tensor(0)
    perm = list(ctx.attr("perm", list(range(x.rank))[::-1]))
    if sorted(perm) != list(range(x.rank)):
        raise ctx.fail(f"perm {perm} is not a permutation of 0..{x.rank - 1}")
    return ctx.em.transpose(x, perm, ctx.hint)


def _reshape(ctx: NodeCtx) -> Value:
    ctx.only_attrs(("allowzero",))
    x = ctx.tensor(0)
    target = ctx.const_ints(1, "the target shape")
    allowzero = bool(ctx.attr("allowzero", 0))
    out = [x.shape[i] if d == 0 and not allowzero else d for i, d in enumerate(target)]
    if out.count(-1) > 1:
        raise ctx.fail(f"shape {target} has more than one -1")
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        if known == 0 or shapes.numel(x.shape) % known:
            raise ctx.fail(f"cannot reshape {list(x.shape)} into {target}")
        out[out.index(-1)] = shapes.numel(x.shape) // known
    if shapes.numel(out) != shapes.numel(x.shape) or min(out, default=0) < 0:
        raise ctx.fail(f"cannot reshape {list(x.shape)} into {target}")
    return ctx.em.reshape(x, out, ctx.hint)


def _flatten(ctx: NodeCtx) -> Value:
    ctx.only_attrs(("axis",))
    x = ctx.tensor(0)
    axis = int(ctx.attr("axis", 1))
    if not -x.rank <= axis <= x.rank:
        raise ctx.fail(f"axis {axis} is out of range for rank {x.rank}")
    if axis < 0:
        axis += x.rank
    out = (shapes.numel(x.shape[:axis]), shapes.numel(x.shape[axis:]))
    return ctx.em.reshape(x, out, ctx.hint)


def _axes_input(ctx: NodeCtx, index: int, attr: str = "axes") -> list[int] | None:
    """Axes from input `index` (opset 13+/18+) or the older attribute."""
    if ctx.has(index):
        return ctx.const_ints(index, "axes")
    value = ctx.attr(attr)
    return None if value is None else [int(a) for a in value]


def _squeeze(ctx: NodeCtx) -> Value:
    ctx.only_attrs(("axes",))
    x = ctx.tensor(0)
    axes = _axes_input(ctx, 1)
    if axes is None:
        drop = {i for i, d in enumerate(x.shape) if d == 1}
    else:
        drop = {axis_of(ctx, a, x.rank) for a in axes}
        if any(x.shape[a] != 1 for a in drop):
            raise ctx.fail(f"cannot squeeze axes {axes} of shape {list(x.shape)}")
    return ctx.em.reshape(x, [d for i, d in enumerate(x.shape) if i not in drop], ctx.hint)


def _unsqueeze(ctx: NodeCtx) -> Value:
    ctx.only_attrs(("axes",))
    x = ctx.tensor(0)
    axes = _axes_input(ctx, 1)
    if axes is None:
        raise ctx.fail("axes are required")
    rank = x.rank + len(axes)
    new = {axis_of(ctx, a, rank) for a in axes}
    rest = iter(x.shape)
    return ctx.em.reshape(x, [1 if i in new else next(rest) for i in range(rank)], ctx.hint)


def _expand(ctx: NodeCtx) -> Value:
    ctx.only_attrs(())
    x = ctx.tensor(0)
    target = ctx.const_ints(1, "the target shape")
    try:
        out = shapes.broadcast_shapes(x.shape, target)
    except shapes.ShapeError as err:
        raise ctx.fail(str(err)) from None
    return ctx.em.broadcast_to(x, out, ctx.hint)


def _concat(ctx: NodeCtx) -> Value:
    ctx.only_attrs(("axis",))
    xs = [ctx.tensor(i) for i in range(ctx.num_inputs) if ctx.has(i)]
    axis = axis_of(ctx, int(ctx.attr("axis")), xs[0].rank)
    try:
        out = shapes.concat_shape([x.shape for x in xs], axis)
    except shapes.ShapeError as err:
        raise ctx.fail(str(err)) from None
    if len(xs) == 1:
        return xs[0]
    return ctx.em.op("concat", xs, out, xs[0].dtype, {"axis": axis}, ctx.hint)


def _slice_bounds(dim: int, start: int, end: int, step: int) -> tuple[int, int]:
    """ONNX Slice clamping of one axis (negative indices count from the end)."""
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return min(max(start, 0), dim), min(max(end, 0), dim)
    return min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)


def _slice(ctx: NodeCtx) -> Value:
    ctx.only_attrs(())
    x = ctx.tensor(0)
    starts = ctx.const_ints(1, "starts")
    ends = ctx.const_ints(2, "ends")
    axes = ctx.const_ints(3, "axes") if ctx.has(3) else list(range(len(starts)))
    steps = ctx.const_ints(4, "steps") if ctx.has(4) else [1] * len(starts)
    lo, hi, st = [0] * x.rank, list(x.shape), [1] * x.rank
    reversed_axes: list[tuple[int, list[int]]] = []
    for a, s, e, step in zip(axes, starts, ends, steps, strict=True):
        axis = axis_of(ctx, a, x.rank)
        if step == 0:
            raise ctx.fail("a step of 0 is not allowed")
        s, e = _slice_bounds(x.shape[axis], s, e, step)
        if step > 0:
            lo[axis], hi[axis], st[axis] = s, max(s, e), step
        else:
            # nn.slice has positive strides only: a reversed axis is a gather.
            reversed_axes.append((axis, list(range(s, e, step))))
    if lo != [0] * x.rank or hi != list(x.shape) or st != [1] * x.rank:
        out = shapes.slice_shape(x.shape, lo, hi, st)
        attrs = {"starts": lo, "limits": hi, "strides": st}
        x = ctx.em.op("slice", [x], out, x.dtype, attrs, ctx.hint)
    for axis, indices in reversed_axes:
        x = _gather_const(ctx, x, np.asarray(indices, dtype=np.int64), axis)
    return x


def _gather_const(ctx: NodeCtx, x: Val, indices: np.ndarray, axis: int) -> Val:
    index = ctx.constant(indices.astype(np.int64), "idx")
    out = shapes.gather_shape(x.shape, indices.shape, axis)
    return ctx.em.op("gather", [x, index], out, x.dtype, {"axis": axis}, ctx.hint)


def _split(ctx: NodeCtx) -> list[Value]:
    ctx.only_attrs(("axis", "num_outputs", "split"))
    x = ctx.tensor(0)
    axis = axis_of(ctx, int(ctx.attr("axis", 0)), x.rank)
    dim, count = x.shape[axis], len(ctx.node.output)
    if ctx.has(1) or ctx.attr("split") is not None:
        sizes = ctx.const_ints(1, "split") if ctx.has(1) else list(ctx.attr("split"))
    elif ctx.attr("num_outputs") is not None:
        # Opset 18: equal chunks of ceil(dim / n), the last one smaller.
        chunk = -(-dim // count)
        sizes = [min(chunk, dim - i * chunk) for i in range(count)]
    else:
        if dim % count:
            raise ctx.fail(f"dimension {dim} does not split evenly into {count} outputs")
        sizes = [dim // count] * count
    if sum(sizes) != dim or len(sizes) != count:
        raise ctx.fail(f"split sizes {sizes} do not match dimension {dim} and {count} outputs")
    outputs: list[Value] = []
    offset = 0
    for size in sizes:
        lo = [0] * x.rank
        hi = list(x.shape)
        lo[axis], hi[axis] = offset, offset + size
        out = shapes.slice_shape(x.shape, lo, hi, [1] * x.rank)
        attrs = {"starts": lo, "limits": hi, "strides": [1] * x.rank}
        outputs.append(ctx.em.op("slice", [x], out, x.dtype, attrs, ctx.hint))
        offset += size
    return outputs


def _gather(ctx: NodeCtx) -> Value:
    ctx.only_attrs(("axis",))
    data = ctx.tensor(0)
    axis = axis_of(ctx, int(ctx.attr("axis", 0)), data.rank)
    indices = ctx.value(1)
    if isinstance(indices, np.ndarray):
        dim = data.shape[axis]
        if np.any((indices < -dim) | (indices >= dim)):
            raise ctx.fail(f"an index is out of range for axis {axis} of size {dim}")
        return _gather_const(ctx, data, np.where(indices < 0, indices + dim, indices), axis)
    if indices.dtype.kind != "i":
        raise ctx.fail(f"indices of element type {indices.dtype} are not supported")
    out = shapes.gather_shape(data.shape, indices.shape, axis)
    return ctx.em.op("gather", [data, indices], out, data.dtype, {"axis": axis}, ctx.hint)


def _gather_nd(ctx: NodeCtx) -> Value:
    """GatherND with constant indices (what exporters write: BERT's attention
    mask `mask[:, None, None, :]` under the dynamo exporter) as one
    `nn.gather`: data's batch and indexed dims flattened into one axis, each
    index tuple turned into its row-major offset in that axis."""
    ctx.only_attrs(("batch_dims",))
    data = ctx.tensor(0)
    indices = ctx.const(1, "the indices").astype(np.int64)
    b = int(ctx.attr("batch_dims", 0))
    r = indices.shape[-1] if indices.ndim else 0
    if indices.ndim < 1 or not 0 <= b < indices.ndim or b + r > data.rank \
            or tuple(indices.shape[:b]) != tuple(data.shape[:b]):
        raise ctx.fail(f"indices of shape {list(indices.shape)} with batch_dims {b} do not "
                       f"index data of shape {list(data.shape)}")
    dims = np.asarray(data.shape[b:b + r], dtype=np.int64)
    if np.any((indices < -dims) | (indices >= dims)):
        raise ctx.fail(f"an index is out of range for dimensions {dims.tolist()}")
    inner = np.where(indices < 0, indices + dims, indices).astype(np.int64)
    offset = inner @ np.asarray([math.prod(data.shape[b + j + 1:b + r]) for j in range(r)],
                                dtype=np.int64).reshape(r)
    rows = math.prod(data.shape[b:b + r])
    batch = np.arange(math.prod(data.shape[:b]), dtype=np.int64).reshape(
        tuple(data.shape[:b]) + (1,) * (offset.ndim - b))
    flat = ctx.em.reshape(data, [math.prod(data.shape[:b + r]), *data.shape[b + r:]], ctx.hint)
    return _gather_const(ctx, flat, batch * rows + offset, 0)


def _trilu(ctx: NodeCtx) -> Value:
    """`select(mask, x, 0)` with the triangular mask computed at import time."""
    ctx.only_attrs(("upper",))
    x = ctx.tensor(0)
    if x.rank < 2:
        raise ctx.fail(f"input must have rank >= 2, got {list(x.shape)}")
    k = int(ctx.const(1, "k").reshape(())) if ctx.has(1) else 0
    ones = np.ones(x.shape[-2:], dtype=bool)
    mask = np.triu(ones, k) if ctx.attr("upper", 1) else np.tril(ones, k)
    zero = ctx.scalar(0, x)
    return ctx.em.op("select", [ctx.constant(mask, "mask"), x, zero], x.shape, x.dtype,
                     hint=ctx.hint)


def _shape(ctx: NodeCtx) -> Value:
    ctx.only_attrs(("start", "end"))
    value = ctx.value(0)
    dims = list(value.shape)
    start, end = int(ctx.attr("start", 0)), int(ctx.attr("end", len(dims)))
    return np.asarray(dims[slice(start, end)], dtype=np.int64)


def _size(ctx: NodeCtx) -> Value:
    ctx.only_attrs(())
    return np.asarray(shapes.numel(ctx.value(0).shape), dtype=np.int64)


def _constant(ctx: NodeCtx) -> Value:
    if len(ctx.node.attribute) != 1:
        raise ctx.fail("expected exactly one value attribute")
    name = ctx.node.attribute[0].name
    value = ctx.attr(name)
    if name == "value":
        return tensor_to_array(value)
    if name in ("value_float", "value_floats"):
        return np.asarray(value, dtype=np.float32)
    if name in ("value_int", "value_ints"):
        return np.asarray(value, dtype=np.int64)
    raise ctx.fail(f"attribute '{name}' is not supported")


def _constant_of_shape(ctx: NodeCtx) -> Value:
    ctx.only_attrs(("value",))
    target = ctx.const_ints(0, "the shape")
    fill = ctx.attr("value")
    value = tensor_to_array(fill) if fill is not None else np.zeros(1, np.float32)
    if any(d < 0 for d in target):
        raise ctx.fail(f"the shape {target} has a negative dimension")
    if shapes.numel(target) <= ctx.state.fold_max_elements:
        return np.full(target, value.reshape(-1)[0], dtype=value.dtype)
    # Too big to hold at import time: one element, broadcast where it is used.
    one = ctx.constant(value.reshape(-1)[:1].reshape([1] * len(target)), ctx.hint)
    return ctx.em.broadcast_to(one, target, ctx.hint)


HANDLERS: dict[str, Handler] = {
    "Transpose": _transpose,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Expand": _expand,
    "Concat": _concat,
    "Slice": _slice,
    "Split": _split,
    "Gather": _gather,
    "GatherND": _gather_nd,
    "Trilu": _trilu,
    "Shape": _shape,
    "Size": _size,
    "Constant": _constant,
    "ConstantOfShape": _constant_of_shape,
}
"""Layout and shape ONNX op type -> handler."""
