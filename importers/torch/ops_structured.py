"""ATen reductions, softmax, matmul, norms, convolution and pooling -> `nn`.

The norms return PyTorch's tuples (`native_layer_norm` gives the output,
the mean and the inverse deviation); only the output is translated, the
others are `None`, and the partitioner keeps a node whose other outputs are
used in PyTorch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fusec.dialects import shapes
from fusec.importers.onnx.emit import FLOAT_DTYPES, Val
from fusec.importers.torch.context import OpCtx, Translator, Value

aten = torch.ops.aten


def _float_input(ctx: OpCtx, name: str = "self") -> Val:
    x = ctx.tensor(name)
    if x.dtype.name not in FLOAT_DTYPES:
        raise ctx.fail(f"element type {x.dtype} is not supported")
    return x


def _softmax(name: str) -> Translator:
    def translate(ctx: OpCtx) -> Value:
        x = _float_input(ctx)
        axis = shapes.normalize_axis(int(ctx.arg("dim")), x.rank)
        return ctx.em.cast(ctx.em.unary(name, x, ctx.hint, axis=axis), ctx.out_dtype, ctx.hint)

    return translate


def _reduce(name: str) -> Translator:
    def translate(ctx: OpCtx) -> Value:
        # in the result's type: a Boolean mask counted (`(x > 0).sum(-1)`) in int64
        x = ctx.em.cast(ctx.tensor("self"), ctx.out_dtype, ctx.hint)
        dims = ctx.arg("dim")
        # an int dim (`max.dim`'s) may be 0; an empty or absent list is every dim
        dims = [dims] if isinstance(dims, int) else list(dims or range(x.rank))
        return ctx.em.reduce(name, x, dims, bool(ctx.arg("keepdim")), ctx.hint)

    return translate


def _reduce_all(name: str) -> Translator:
    """`x.max()`, `x.min()`: over every dimension, to a rank-0 tensor."""

    def translate(ctx: OpCtx) -> Value:
        x = ctx.em.cast(_float_input(ctx), ctx.out_dtype, ctx.hint)
        return ctx.em.reduce(name, x, list(range(x.rank)), False, ctx.hint)

    return translate


def _first_index(ctx: OpCtx, x: Val, dim: int, extreme: Val, keepdim: bool) -> Val:
    """The int64 index along `dim` of the first element of `x` equal to
    `extreme` (its reduction along `dim`, kept as a size-1 dim), a NaN
    counting as equal when `extreme` is NaN (PyTorch's argmax and argmin
    pick the first NaN): the least index among the hits."""
    em, h = ctx.em, ctx.hint
    eq = em.op("cmp", [x, extreme], x.shape, np.dtype(bool), {"predicate": "eq"}, h)
    if x.dtype.kind == "f":  # NaN == NaN is false: a NaN extreme hits the NaNs
        nan = em.op("cmp", [x, x], x.shape, np.dtype(bool), {"predicate": "ne"}, h)
        true = em.broadcast_to(ctx.scalar(True, np.dtype(bool)), x.shape, h)
        eq = em.op("select", [eq, true, nan], x.shape, np.dtype(bool), hint=h)
    n = x.shape[dim]
    positions = ctx.constant(np.arange(n, dtype=np.int64).reshape(
        [n if d == dim else 1 for d in range(x.rank)]), "positions")
    past = em.broadcast_to(ctx.scalar(n, np.dtype("int64")), x.shape, h)
    index = em.op("select", [eq, em.broadcast_to(positions, x.shape, h), past], x.shape,
                  np.dtype("int64"), hint=h)
    return em.reduce("min", index, [dim], keepdim, h)


def _extreme_and_index(ctx: OpCtx, name: str, x: Val, dim: int,
                       keepdim: bool) -> tuple[Val, Val]:
    """`x`'s reduction `name` along `dim` (kept as a size-1 dim; Booleans
    reduced as 0s and 1s) and the first index that reaches it (`_first_index`)."""
    if x.dtype.kind == "b":
        x = ctx.em.cast(x, np.dtype("int64"), ctx.hint)
    extreme = ctx.em.reduce(name, x, [dim], True, ctx.hint)
    return extreme, _first_index(ctx, x, dim, extreme, keepdim)


def _arg_reduce(name: str) -> Translator:
    """`argmax`/`argmin` (over one dim, or the whole tensor flattened):
    `_extreme_and_index`'s index."""

    def translate(ctx: OpCtx) -> Value:
        x = ctx.tensor("self")
        dim, keepdim = ctx.arg("dim"), bool(ctx.arg("keepdim"))
        if dim is None:
            flat = ctx.em.reshape(x, (int(np.prod(x.shape)),), ctx.hint)
            index = _extreme_and_index(ctx, name, flat, 0, False)[1]
            return ctx.em.reshape(index, ctx.out_shape, ctx.hint) if keepdim else index
        dim = shapes.normalize_axis(int(dim), max(x.rank, 1))
        return _extreme_and_index(ctx, name, x, dim, keepdim)[1]

    return translate


def _reduce_values(name: str) -> Translator:
    """`x.max(dim)` and `x.min(dim)`: the values as `nn.reduce_*`, the
    indices as argmax/argmin's first index that reaches them."""

    def translate(ctx: OpCtx) -> Value:
        x = ctx.tensor("self")
        dim = shapes.normalize_axis(int(ctx.arg("dim")), max(x.rank, 1))
        keepdim = bool(ctx.arg("keepdim"))
        extreme, index = _extreme_and_index(ctx, name, x, dim, keepdim)
        values = extreme if keepdim else ctx.em.reshape(
            extreme, shapes.reduced_shape(x.shape, [dim], False), ctx.hint)
        return (ctx.em.cast(values, x.dtype, ctx.hint), index)

    return translate


def _matmul(ctx: OpCtx) -> Value:
    a, b = _float_input(ctx), _float_input(ctx, "mat2")
    return ctx.em.op("matmul", [a, b], shapes.matmul_shape(a.shape, b.shape), a.dtype,
                     hint=ctx.hint)


def _addmm(ctx: OpCtx) -> Value:
    beta, alpha = ctx.arg("beta"), ctx.arg("alpha")
    a, b = _float_input(ctx, "mat1"), _float_input(ctx, "mat2")
    product = ctx.em.op("matmul", [a, b], shapes.matmul_shape(a.shape, b.shape), a.dtype,
                        hint=ctx.hint)
    if alpha != 1:
        product = ctx.em.binary("mul", product, ctx.scalar(alpha, a.dtype), ctx.hint)
    bias = _float_input(ctx)
    if beta != 1:
        bias = ctx.em.binary("mul", bias, ctx.scalar(beta, a.dtype), ctx.hint)
    return ctx.em.binary("add", product, bias, ctx.hint)


def _optional_param(ctx: OpCtx, name: str, shape: tuple[int, ...], fill: float,
                    dtype: np.dtype) -> Val:
    """A weight or bias argument, or the constant it defaults to when None."""
    if ctx.arg(name) is None:
        return ctx.constant(np.full(shape, fill, dtype=dtype), name)
    return ctx.tensor(name)


def _norm_operands(ctx: OpCtx, x: Val, params: list[Val]) -> tuple[Val, list[Val]]:
    """The input and the parameters of a norm in one element type. PyTorch
    takes half-precision activations with f32 weights (mixed precision) and
    computes in f32: so does fusec, rounding the result to the output type."""
    dtypes = {p.dtype for p in params} - {x.dtype}
    if not dtypes:
        return x, params
    wide = np.dtype("float64") if np.dtype("float64") in dtypes else np.dtype("float32")
    return (ctx.em.cast(x, wide, ctx.hint), [ctx.em.cast(p, wide, ctx.hint) for p in params])


def _layer_norm(ctx: OpCtx) -> Value:
    x = _float_input(ctx, "input")
    normalized = tuple(int(d) for d in ctx.arg("normalized_shape"))
    axis = x.rank - len(normalized)
    scale = _optional_param(ctx, "weight", normalized, 1.0, x.dtype)
    bias = _optional_param(ctx, "bias", normalized, 0.0, x.dtype)
    x, params = _norm_operands(ctx, x, [scale, bias])
    out = ctx.em.op("layer_norm", [x, *params], x.shape, x.dtype,
                    {"axis": axis, "epsilon": float(ctx.arg("eps"))}, ctx.hint)
    return (ctx.em.cast(out, ctx.out_dtype, ctx.hint), None, None)


def _batch_norm(ctx: OpCtx) -> Value:
    x = _float_input(ctx, "input")
    if x.rank not in (2, 3, 4):
        raise ctx.fail(f"batch norm over rank {x.rank} is not supported (N, C, [L | H, W])")
    shape = x.shape
    # BatchNorm1d's (N, C) and (N, C, L) as the NCHW image they are
    x = ctx.em.reshape(x, (*shape, *(1,) * (4 - x.rank)), ctx.hint)
    channels = (x.shape[1],)
    scale = _optional_param(ctx, "weight", channels, 1.0, x.dtype)
    bias = _optional_param(ctx, "bias", channels, 0.0, x.dtype)
    mean, var = ctx.tensor("running_mean"), ctx.tensor("running_var")
    x, params = _norm_operands(ctx, x, [scale, bias, mean, var])
    out = ctx.em.op("batch_norm", [x, *params], x.shape, x.dtype,
                    {"epsilon": float(ctx.arg("eps"))}, ctx.hint)
    out = ctx.em.reshape(out, shape, ctx.hint)
    return (ctx.em.cast(out, ctx.out_dtype, ctx.hint), None, None)


def _pair(values: Any, default: int | None = None) -> list[int]:
    values = [int(v) for v in values] if values else []
    if not values and default is not None:
        return [default, default]
    return values * 2 if len(values) == 1 else values


def _convolution(ctx: OpCtx) -> Value:
    x, w = _float_input(ctx, "input"), _float_input(ctx, "weight")
    if x.rank not in (3, 4):
        raise ctx.fail(f"{x.rank - 2}-d convolution is not supported (1-d and 2-d only)")
    if ctx.arg("transposed"):
        raise ctx.fail("transposed convolution is not supported")
    if any(int(p) for p in ctx.arg("output_padding") or []):
        raise ctx.fail("output padding is not supported")
    out_shape = ctx.out_shape
    pad, stride, dilation = (_pair(ctx.arg(n), d) for n, d in
                             (("padding", 0), ("stride", 1), ("dilation", 1)))
    if x.rank == 3:
        # a 1-d convolution is a 2-d one over an image one row high
        x = ctx.em.reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]), ctx.hint)
        w = ctx.em.reshape(w, (w.shape[0], w.shape[1], 1, w.shape[2]), ctx.hint)
        pad, stride, dilation = [0, pad[0]], [1, stride[0]], [1, dilation[0]]
        out_shape = (out_shape[0], out_shape[1], 1, out_shape[2])
    attrs = {"strides": stride, "pads": [pad[0], pad[1], pad[0], pad[1]],
             "dilations": dilation, "groups": int(ctx.arg("groups"))}
    y = ctx.em.op("conv2d", [x, w], out_shape, x.dtype, attrs, ctx.hint)
    if ctx.arg("bias") is not None:
        bias = ctx.em.reshape(ctx.tensor("bias"), (1, w.shape[0], 1, 1), ctx.hint)
        y = ctx.em.binary("add", y, bias, ctx.hint)
    return ctx.em.reshape(y, ctx.out_shape, ctx.hint)


def _pool_attrs(ctx: OpCtx) -> dict[str, object]:
    if ctx.arg("ceil_mode"):
        raise ctx.fail("ceil_mode=True is not supported")
    kernel = _pair(ctx.arg("kernel_size"))
    pad = _pair(ctx.arg("padding"), 0)
    return {"kernel": kernel, "strides": _pair(ctx.arg("stride")) or kernel,
            "pads": [pad[0], pad[1], pad[0], pad[1]]}


def _max_pool(ctx: OpCtx) -> Value:
    x = _float_input(ctx)
    if _pair(ctx.arg("dilation"), 1) != [1, 1]:
        raise ctx.fail("dilated pooling is not supported")
    out = ctx.em.op("max_pool2d", [x], ctx.out_shape, x.dtype, _pool_attrs(ctx), ctx.hint)
    return (out, None)


def _avg_pool(ctx: OpCtx) -> Value:
    x = _float_input(ctx)
    attrs = _pool_attrs(ctx)
    padded = any(attrs["pads"])  # type: ignore[arg-type]
    if ctx.arg("divisor_override") is not None or (padded and ctx.arg("count_include_pad")):
        raise ctx.fail("counting padding in the average is not supported")
    return ctx.em.op("avg_pool2d", [x], ctx.out_shape, x.dtype, attrs, ctx.hint)


def _embedding(ctx: OpCtx) -> Value:
    table, indices = _float_input(ctx, "weight"), ctx.tensor("indices")
    indices = ctx.em.cast(indices, np.dtype("int64"), ctx.hint)
    return ctx.em.op("gather", [table, indices], ctx.out_shape, table.dtype, {"axis": 0},
                     ctx.hint)


def _take(ctx: OpCtx, table: Val, axis: int, index: Any) -> Val:
    return _gather(ctx, table, axis, ctx.as_val(index), ctx.out_shape)


def _gather(ctx: OpCtx, table: Val, axis: int, indices: Val, shape: tuple[int, ...]) -> Val:
    if indices.dtype.kind not in "iu":
        raise ctx.fail(f"indices of element type {indices.dtype} are not supported (integers only)")
    indices = ctx.em.cast(indices, np.dtype("int64"), ctx.hint)
    return ctx.em.op("gather", [table, indices], shape, table.dtype, {"axis": axis}, ctx.hint)


def _index(ctx: OpCtx) -> Value:
    """`x[:, idx]`: one integer index tensor (any rank), the other
    dimensions whole, is `nn.gather` along its dimension. Index tensors of
    adjacent dimensions that each vary along one broadcast dimension of
    their own, in order (`x[:, :, rows[:, None], cols]`, as nearest-neighbour
    upsampling writes it; `mask[b[:, None, None, None], k[None, None, None, :]]`,
    as a padding mask is expanded to (B, 1, 1, K)), pick each dimension
    apart: one gather per dimension, then a reshape that puts each picked
    size at its broadcast place."""
    x = ctx.tensor("self")
    picked = [(k, t) for k, t in enumerate(ctx.arg("indices")) if t is not None]
    if len(picked) == 1:
        (axis, index), = picked
        return _take(ctx, x, axis, index)
    axes = [k for k, _ in picked]
    if axes != list(range(axes[0], axes[0] + len(axes))):
        raise ctx.fail("indexing by tensors of dimensions that are not adjacent is not supported")
    shapes_ = [tuple(ctx.as_val(t).shape) for _, t in picked]
    common = np.broadcast_shapes(*shapes_)
    places: list[int] = []  # where each index tensor's sizes go in `common`
    for shape in shapes_:
        aligned = (1,) * (len(common) - len(shape)) + shape
        varying = [d for d, n in enumerate(aligned) if n != 1]
        if len(varying) > 1 or (varying and places and varying[0] <= places[-1]):
            raise ctx.fail("indexing by several tensors is supported where each varies along "
                           "one dimension of its own, in the order of the indexed dimensions")
        places.append(varying[0] if varying else (places[-1] if places else -1))
    for (axis, index), shape in zip(picked, shapes_, strict=True):
        size = int(np.prod(shape))
        flat = ctx.em.reshape(ctx.as_val(index), (size,), ctx.hint)
        out = list(x.shape)
        out[axis] = size
        x = _gather(ctx, x, axis, flat, tuple(out))
    if tuple(x.shape) != ctx.out_shape:  # the same elements in the same order
        x = ctx.em.reshape(x, ctx.out_shape, ctx.hint)
    return x


_GATHER_OFFSETS_LIMIT = 1 << 22
"""The most elements of a `torch.gather` index whose row offsets are made a
constant (8 bytes each in OUT)."""


def _gather_along(ctx: OpCtx) -> Value:
    """`torch.gather(x, dim, index)` (`take_along_axis`): out[..i..] =
    x[..i.. with i_dim = index[..i..]]. As one `nn.gather` from the
    flattened `x`: the element offset `index * stride(dim)` plus the offset
    of the other coordinates, a constant of the index's shape (none where
    the index is one wide in every other dimension, as a position-id
    lookup is)."""
    x, index = ctx.tensor("self"), ctx.tensor("index")
    dim = shapes.normalize_axis(int(ctx.arg("dim")), x.rank)
    if index.rank != x.rank:
        raise ctx.fail("gather with an index of another rank than its input is not supported")
    if index.dtype.kind not in "iu":
        raise ctx.fail(f"indices of element type {index.dtype} are not supported (integers only)")
    strides = [int(np.prod(x.shape[d + 1:])) for d in range(x.rank)]
    offsets = np.zeros(tuple(index.shape), np.int64)
    for d, n in enumerate(index.shape):
        if d != dim and n > 1:
            offsets = offsets + (np.arange(n, dtype=np.int64) * strides[d]).reshape(
                [n if e == d else 1 for e in range(index.rank)])
    flat_index = ctx.em.cast(index, np.dtype("int64"), ctx.hint)
    if strides[dim] != 1:
        flat_index = ctx.em.binary("mul", flat_index,
                                   ctx.scalar(strides[dim], np.dtype("int64")), ctx.hint)
    if offsets.any():
        if offsets.size > _GATHER_OFFSETS_LIMIT:
            raise ctx.fail(f"gather with an index of more than {_GATHER_OFFSETS_LIMIT} elements "
                           "is not supported")
        flat_index = ctx.em.binary("add", flat_index, ctx.constant(offsets, "offsets"), ctx.hint)
    table = ctx.em.reshape(x, (int(np.prod(x.shape)), 1), ctx.hint)
    picked = _gather(ctx, table, 0, flat_index, (*index.shape, 1))
    return ctx.em.reshape(picked, ctx.out_shape, ctx.hint)


CUMSUM_MOST = 1024
"""The longest dimension a cumulative sum runs along: it is a product with a
constant triangle of ones of that size squared (4 MiB at 1024)."""

_CASTS = (aten._to_copy.default, torch.ops.prims.convert_element_type.default)


def _zero_or_one(ctx: OpCtx, arg: Any) -> bool:
    """Whether `arg` holds only 0s and 1s: a Boolean tensor, one cast from a
    Boolean tensor (`mask.int()`), or a known constant of 0s and 1s."""
    known = ctx.known(arg)
    if known is not None:
        return bool(np.isin(known, (0, 1)).all())
    if not isinstance(arg, torch.fx.Node):
        return False
    if getattr(arg.meta.get("val"), "dtype", None) is torch.bool:
        return True
    source = arg.args[0] if arg.target in _CASTS and arg.args else None
    return isinstance(source, torch.fx.Node) and \
        getattr(source.meta.get("val"), "dtype", None) is torch.bool


def _cumsum(ctx: OpCtx) -> Value:
    """`torch.cumsum` along a dimension of at most `CUMSUM_MOST` elements:
    a float32 product with the upper triangle of ones (x @ T, T[i, j] = 1
    for i <= j), the dimension moved last and back. Integers only where they
    are 0s and 1s (a mask's `cumsum`, as position ids are counted): their
    partial sums are then exact in float32; other integers stay in PyTorch."""
    x = ctx.tensor("self")
    dim = shapes.normalize_axis(int(ctx.arg("dim")), max(x.rank, 1))
    if x.rank == 0:
        return ctx.em.cast(x, ctx.out_dtype, ctx.hint)
    n = x.shape[dim]
    if n > CUMSUM_MOST:
        raise ctx.fail(f"cumsum along more than {CUMSUM_MOST} elements is not supported")
    if x.dtype.name not in FLOAT_DTYPES and not _zero_or_one(ctx, ctx.arg("self")):
        raise ctx.fail("cumsum of integers is supported for 0/1 values (a mask) only")
    perm = [d for d in range(x.rank) if d != dim] + [dim]
    moved = x if dim == x.rank - 1 else ctx.em.transpose(x, perm, ctx.hint)
    rows = ctx.em.reshape(ctx.em.cast(moved, np.dtype("float32"), ctx.hint),
                          (int(np.prod(moved.shape[:-1])), n), ctx.hint)
    triangle = ctx.constant(np.triu(np.ones((n, n), np.float32)), "triangle")
    summed = ctx.em.op("matmul", [rows, triangle], (rows.shape[0], n), np.dtype("float32"),
                       hint=ctx.hint)
    summed = ctx.em.reshape(summed, moved.shape, ctx.hint)
    if dim != x.rank - 1:
        summed = ctx.em.transpose(summed, list(np.argsort(perm)), ctx.hint)
    return ctx.em.cast(summed, ctx.out_dtype, ctx.hint)


def _index_select(ctx: OpCtx) -> Value:
    x = ctx.tensor("self")
    return _take(ctx, x, shapes.normalize_axis(int(ctx.arg("dim")), x.rank), ctx.arg("index"))


TRANSLATORS: dict[Any, Translator] = {
    aten._softmax.default: _softmax("softmax"),
    aten._log_softmax.default: _softmax("log_softmax"),
    aten.sum.dim_IntList: _reduce("sum"),
    aten.mean.dim: _reduce("mean"),
    aten.amax.default: _reduce("max"),
    aten.amin.default: _reduce("min"),
    aten.max.default: _reduce_all("max"),
    aten.min.default: _reduce_all("min"),
    aten.max.dim: _reduce_values("max"),
    aten.min.dim: _reduce_values("min"),
    aten.argmax.default: _arg_reduce("max"),
    aten.argmin.default: _arg_reduce("min"),
    aten.mm.default: _matmul,
    aten.bmm.default: _matmul,
    aten.addmm.default: _addmm,
    aten.native_layer_norm.default: _layer_norm,
    aten._native_batch_norm_legit_no_training.default: _batch_norm,
    aten.convolution.default: _convolution,
    aten.max_pool2d_with_indices.default: _max_pool,
    aten.avg_pool2d.default: _avg_pool,
    aten.embedding.default: _embedding,
    aten.index.Tensor: _index,
    aten._unsafe_index.Tensor: _index,
    aten.index_select.default: _index_select,
    aten.gather.default: _gather_along,
    aten.cumsum.default: _cumsum,
}
"""ATen overload -> its translator (structured part of the table)."""

MULTI_OUTPUT_USED: dict[Any, frozenset[int]] = {
    aten.native_layer_norm.default: frozenset({0}),
    aten._native_batch_norm_legit_no_training.default: frozenset({0}),
    aten.max_pool2d_with_indices.default: frozenset({0}),
    aten.max.dim: frozenset({0, 1}),
    aten.min.dim: frozenset({0, 1}),
}
"""Multi-output ops and the outputs that are translated: the node falls back
to PyTorch when any other output is used."""
