"""One builder per `nn` op: each picks operands from a `Builder` (or makes
fresh arguments), chooses attributes at random and appends the op.

`OPS` lists (op name, builder); `WEIGHTS` how often each is drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np

from fusec.dialects import shapes
from fusec.fuzz.generate import POSITIVE_SLOTS, Builder
from fusec.fuzz.graph import TType

UNARY = ["nn.neg", "nn.abs", "nn.exp", "nn.log", "nn.sqrt", "nn.rsqrt", "nn.reciprocal",
         "nn.tanh", "nn.erf", "nn.sin", "nn.cos", "nn.sigmoid", "nn.relu", "nn.silu"]
BINARY = ["nn.add", "nn.sub", "nn.mul", "nn.div", "nn.max", "nn.min", "nn.pow"]
REDUCE = ["nn.reduce_sum", "nn.reduce_max", "nn.reduce_min", "nn.reduce_mean"]


def _ints(values: list[int]) -> str:
    return "[" + ", ".join(map(str, values)) + "]"


def _axis(b: Builder, axis: int, rank: int) -> int:
    """`axis` or its negative spelling."""
    return axis - rank if b.chance(0.4) else axis


def unary(b: Builder, op: str) -> str:
    """neg, abs, exp, log, ... : `: T`."""
    x = b.positive_value(b.dtype) if op in POSITIVE_SLOTS else b.float_value()
    return b.emit(op, [x], b.types[x], same_type=True)


def gelu(b: Builder) -> str:
    """nn.gelu with either approximation, or the attribute omitted."""
    x = b.float_value()
    attrs = b.choice(["", '{approximate = "none"}', '{approximate = "tanh"}'])
    return b.emit("nn.gelu", [x], b.types[x], attrs, same_type=True)


def clamp(b: Builder) -> str:
    """nn.clamp with both, one or no bound."""
    x = b.float_value()
    attrs = b.choice(["{min = 0.5, max = 6.0}", "{min = -1.0}", "{max = 0.25}", "",
                      "{min = 0.5}", "{min = -0.5 : f32, max = 0.5 : f32}"])
    return b.emit("nn.clamp", [x], b.types[x], attrs, same_type=True)


def binary(b: Builder, op: str) -> str:
    """add, sub, mul, div, max, min, pow with broadcasting (either side)."""
    x = b.positive_value(b.dtype) if POSITIVE_SLOTS.get(op) == 0 else b.float_value()
    y = b.partner(x, positive=POSITIVE_SLOTS.get(op) == 1)
    if POSITIVE_SLOTS.get(op) is None and b.chance(0.3):
        x, y = y, x
    t = b.types[x].with_shape(shapes.broadcast_shapes(b.types[x].shape, b.types[y].shape))
    return b.emit(op, [x, y], t)


def cmp(b: Builder) -> str:
    """nn.cmp with a random predicate: an i1 mask."""
    x = b.float_value()
    y = b.partner(x)
    pred = b.choice(["lt", "le", "gt", "ge", "eq", "ne"])
    shape = shapes.broadcast_shapes(b.types[x].shape, b.types[y].shape)
    return b.emit("nn.cmp", [x, y], TType(shape, "i1"), f'{{predicate = "{pred}"}}')


def select(b: Builder) -> str:
    """nn.select of a mask (existing or fresh) and two broadcast operands."""
    x = b.float_value()
    y = b.partner(x)
    shape = shapes.broadcast_shapes(b.types[x].shape, b.types[y].shape)
    cond = b.pick(lambda t: t.dtype == "i1" and _fits(t.shape, shape))
    if cond is None:
        cond = b.new_arg(TType(b.partner_shape(shape), "i1"))
    out = shapes.broadcast_shapes(shape, b.types[cond].shape)
    return b.emit("nn.select", [cond, x, y], b.types[x].with_shape(out))


def cast(b: Builder) -> str:
    """nn.cast between f32 and the program's half type, f16 unless it is bf16
    (now and then from an i1 mask)."""
    x = b.pick(lambda t: t.dtype == "i1") if b.chance(0.2) else None
    x = x or b.float_value()
    src = b.types[x].dtype
    half = "bf16" if b.dtype == "bf16" else "f16"
    dst = half if src == "f32" else "f32" if src in ("f16", "bf16") else b.dtype
    return b.emit("nn.cast", [x], TType(b.types[x].shape, dst))


def constant(b: Builder) -> str:
    """nn.constant, splat or not."""
    return b.constant(TType(b.shape(), b.dtype), positive=b.chance(0.3))


def reduce(b: Builder, op: str) -> str:
    """A reduction over a random non-empty set of axes, keepdims either way."""
    x = b.float_value(min_rank=1)
    shape = b.types[x].shape
    rank = len(shape)
    axes = sorted(int(a) for a in b.rng.choice(rank, b.int(1, rank), replace=False))
    keep = b.chance(0.5)
    out = shapes.reduced_shape(shape, tuple(axes), keep)
    if op in ("nn.reduce_max", "nn.reduce_min") and 0 in [shape[a] for a in axes] \
            and 0 not in out:
        op = "nn.reduce_sum"  # the maximum of nothing is undefined: a verifier error
    spelled = _ints([_axis(b, a, rank) for a in axes])
    attrs = f"{{axes = {spelled}, keepdims = {'true' if keep else 'false'}}}"
    if not keep and b.chance(0.3):
        attrs = f"{{axes = {spelled}}}"
    return b.emit(op, [x], b.types[x].with_shape(out), attrs)


def softmax(b: Builder, op: str) -> str:
    """softmax / log_softmax over a random axis."""
    x = b.float_value(min_rank=1)
    rank = len(b.types[x].shape)
    attrs = "" if b.chance(0.2) else f"{{axis = {_axis(b, b.int(0, rank - 1), rank)}}}"
    return b.emit(op, [x], b.types[x], attrs, same_type=True)


def norm(b: Builder, op: str) -> str:
    """layer_norm (scale, bias) or rms_norm (scale) over trailing dimensions."""
    x = b.float_value(min_rank=1)
    t = b.types[x]
    axis = b.int(0, len(t.shape) - 1)
    count = 2 if op == "nn.layer_norm" else 1
    params = [b.new_arg(t.with_shape(t.shape[axis:])) for _ in range(count)]
    eps = b.choice(["", ", epsilon = 1.0e-05", ", epsilon = 0.001 : f32"])
    return b.emit(op, [x, *params], t, f"{{axis = {_axis(b, axis, len(t.shape))}{eps}}}")


def batch_norm(b: Builder) -> str:
    """nn.batch_norm over channel dimension 1 (variance drawn positive)."""
    x = b.float_value(min_rank=2)
    t = b.types[x]
    c = t.with_shape((t.shape[1],))
    params = [b.new_arg(c) for _ in range(3)] + [b.positive_value(t.dtype, (t.shape[1],))]
    params[3] = params[3] if b.types[params[3]].shape == (t.shape[1],) else b.new_arg(c)
    return b.emit("nn.batch_norm", [x, *params], t, b.choice(["", "{epsilon = 1.0e-03}"]))


def matmul(b: Builder) -> str:
    """nn.matmul with a fresh right operand; batch dimensions may broadcast."""
    x = b.float_value(min_rank=2)
    t = b.types[x]
    *batch, _, k = t.shape
    n = b.int(1, 4)
    rhs_batch = tuple(b.partner_shape(tuple(batch))) if batch and b.chance(0.5) else ()
    if not _fits(rhs_batch, tuple(batch)):
        rhs_batch = ()
    if b.chance(0.25):  # a transposed right operand: fusion may fold it into the loads
        wt = b.new_arg(t.with_shape((*rhs_batch, n, k)))
        perm = [*range(len(rhs_batch)), len(rhs_batch) + 1, len(rhs_batch)]
        w = b.emit("nn.transpose", [wt], t.with_shape((*rhs_batch, k, n)),
                   f"{{perm = {_ints(perm)}}}")
    else:
        w = b.new_arg(t.with_shape((*rhs_batch, k, n)))
    if b.chance(0.2):  # the existing value on the right
        w2 = b.new_arg(t.with_shape((b.int(1, 3), t.shape[-2])))
        out = shapes.matmul_shape(b.types[w2].shape, t.shape)
        return b.emit("nn.matmul", [w2, x], t.with_shape(out))
    out = shapes.matmul_shape(t.shape, b.types[w].shape)
    return b.emit("nn.matmul", [x, w], t.with_shape(out))


def _window_attrs(b: Builder, h: int, w: int, kh: int, kw: int, pool: bool) -> tuple[
        list[int], list[int], list[int]]:
    strides = [b.int(1, 2), b.int(1, 2)]
    lim = [kh - 1, kw - 1] if pool else [1, 1]
    pads = [b.int(0, lim[0]), b.int(0, lim[1]), b.int(0, lim[0]), b.int(0, lim[1])]
    dil = [b.int(1, 2) if kh > 1 and h >= 2 * kh else 1, b.int(1, 2) if kw > 1 and
           w >= 2 * kw else 1]
    return strides, pads, dil


def _image(b: Builder) -> str:
    """A float NCHW value with H, W >= 1 (windows need them), or a fresh one."""
    found = b.pick(lambda t: t.is_float and len(t.shape) == 4 and min(t.shape[2:]) >= 1)
    if found is not None and b.chance(0.85):
        return found
    return b.new_arg(TType((*b.shape(2), b.int(1, 4), b.int(1, 4)), b.dtype))


def conv2d(b: Builder) -> str:
    """nn.conv2d, NCHW/OIHW, with strides, pads, dilations and groups."""
    return conv2d_of(b, _image(b), (1, 2, 3, 4), lambda groups: 2)


def conv2d_of(b: Builder, x: str, group_counts: tuple[int, ...],
              most_per_group: Callable[[int], int]) -> str:
    """nn.conv2d of image `x`: groups drawn from `group_counts` (those that
    divide its channels), up to `most_per_group(groups)` outputs per group,
    a kernel of at most 3x3, and random strides, pads and dilations."""
    t = b.types[x]
    _n, c, h, w = t.shape
    groups = b.choice([g for g in group_counts if c % g == 0])
    kh, kw = b.int(1, min(3, h + 1)), b.int(1, min(3, w + 1))
    o = groups * b.int(1, most_per_group(groups))
    wt = b.new_arg(t.with_shape((o, c // groups, kh, kw)))
    strides, pads, dil = _window_attrs(b, h, w, kh, kw, pool=False)
    try:
        out = shapes.conv2d_shape(t.shape, (o, c // groups, kh, kw), strides, pads, dil, groups)
    except shapes.ShapeError:
        strides, pads, dil = [1, 1], [1, 1, 1, 1], [1, 1]
        out = shapes.conv2d_shape(t.shape, (o, c // groups, kh, kw), strides, pads, dil, groups)
    attrs = (f"{{strides = {_ints(strides)}, pads = {_ints(pads)}, dilations = {_ints(dil)}, "
             f"groups = {groups}}}")
    return b.emit("nn.conv2d", [x, wt], t.with_shape(out), attrs)


def pool(b: Builder, op: str) -> str:
    """max_pool2d / avg_pool2d with a window that fits."""
    x = _image(b)
    t = b.types[x]
    h, w = t.shape[2:]
    kernel = [b.int(1, min(3, h)), b.int(1, min(3, w))]
    strides, pads, _ = _window_attrs(b, h, w, kernel[0], kernel[1], pool=True)
    out = shapes.pool2d_shape(t.shape, kernel, strides, pads)
    attrs = f"{{kernel = {_ints(kernel)}, strides = {_ints(strides)}, pads = {_ints(pads)}}}"
    return b.emit(op, [x], t.with_shape(out), attrs)


def reshape(b: Builder) -> str:
    """nn.reshape to a random factorization of the element count."""
    x = b.pick() or b.float_value()
    t = b.types[x]
    n = int(np.prod(t.shape, dtype=np.int64))
    dims: list[int] = []
    rest = n
    for _ in range(b.int(0, 3)):
        f = b.choice([d for d in range(1, rest + 1) if rest % d == 0]) if rest else 0
        dims.append(f)
        rest = rest // f if f else 0
    dims.append(rest)
    order = [int(i) for i in b.rng.permutation(len(dims))]
    return b.emit("nn.reshape", [x], t.with_shape(tuple(dims[i] for i in order)))


def broadcast_to(b: Builder) -> str:
    """nn.broadcast_to: leading dimensions added, 1s expanded."""
    x = b.pick() or b.float_value()
    t = b.types[x]
    grown = tuple(b.int(1, 3) if d == 1 and b.chance(0.7) else d for d in t.shape)
    lead = tuple(b.int(1, 3) for _ in range(b.int(0, max(0, 4 - len(grown)))))
    return b.emit("nn.broadcast_to", [x], t.with_shape((*lead, *grown)))


def transpose(b: Builder) -> str:
    """nn.transpose by a random permutation."""
    x = b.pick(lambda t: len(t.shape) >= 2) or b.float_value(min_rank=2)
    t = b.types[x]
    perm = [int(i) for i in b.rng.permutation(len(t.shape))]
    return b.emit("nn.transpose", [x], t.with_shape(tuple(t.shape[p] for p in perm)),
                  f"{{perm = {_ints(perm)}}}")


def slice_(b: Builder) -> str:
    """nn.slice with random bounds and strides (strides sometimes omitted)."""
    x = b.pick(lambda t: len(t.shape) >= 1 and 0 not in t.shape) or b.float_value(min_rank=1)
    t = b.types[x]
    starts = [b.int(0, max(0, d - 1)) for d in t.shape]
    limits = [b.int(s + 1, d) if d else 0 for s, d in zip(starts, t.shape, strict=True)]
    strides = [b.int(1, 2) for _ in t.shape]
    out = shapes.slice_shape(t.shape, starts, limits, strides)
    attrs = f"starts = {_ints(starts)}, limits = {_ints(limits)}"
    if any(s != 1 for s in strides) or b.chance(0.5):
        attrs += f", strides = {_ints(strides)}"
    return b.emit("nn.slice", [x], t.with_shape(out), "{" + attrs + "}")


def concat(b: Builder) -> str:
    """nn.concat of a value with 1..3 others along a random axis."""
    x = b.pick(lambda t: len(t.shape) >= 1) or b.float_value(min_rank=1)
    t = b.types[x]
    axis = b.int(0, len(t.shape) - 1)
    parts = [x]
    for _ in range(b.int(1, 3)):
        shape = list(t.shape)
        shape[axis] = b.int(1, 3)
        same = b.pick(lambda u, s=tuple(shape): u == t.with_shape(s)) if b.chance(0.3) else None
        parts.append(same or b.new_arg(t.with_shape(tuple(shape))))
    if b.chance(0.3):
        parts.reverse()
    out = shapes.concat_shape([b.types[p].shape for p in parts], axis)
    attrs = "" if axis == 0 and b.chance(0.3) else f"{{axis = {_axis(b, axis, len(t.shape))}}}"
    return b.emit("nn.concat", parts, t.with_shape(out), attrs)


def gather(b: Builder) -> str:
    """nn.gather with fresh indices (i64 or i32) along a random axis."""
    x = b.float_value(min_rank=1)
    t = b.types[x]
    axis = b.int(0, len(t.shape) - 1)
    shape = b.shape(b.int(0, 2))
    if t.shape[axis] == 0 and 0 not in shape:
        shape = (0,)  # no index is in range of an empty axis: a verifier error otherwise
    ids = b.new_arg(TType(shape, b.choice(["i64", "i32"])))
    out = shapes.gather_shape(t.shape, b.types[ids].shape, axis)
    attrs = "" if axis == 0 and b.chance(0.3) else f"{{axis = {_axis(b, axis, len(t.shape))}}}"
    return b.emit("nn.gather", [x, ids], t.with_shape(out), attrs)


def _fits(small: tuple[int, ...], big: tuple[int, ...]) -> bool:
    """`small` broadcasts to `big` without changing it."""
    try:
        return shapes.broadcast_shapes(small, big) == big
    except shapes.ShapeError:
        return False


Builder_ = Callable[[Builder], str]
OPS: list[tuple[str, Builder_]] = (
    [(op, partial(unary, op=op)) for op in UNARY]
    + [("nn.gelu", gelu), ("nn.clamp", clamp)]
    + [(op, partial(binary, op=op)) for op in BINARY]
    + [("nn.cmp", cmp), ("nn.select", select), ("nn.cast", cast), ("nn.constant", constant)]
    + [(op, partial(reduce, op=op)) for op in REDUCE]
    + [(op, partial(softmax, op=op)) for op in ("nn.softmax", "nn.log_softmax")]
    + [(op, partial(norm, op=op)) for op in ("nn.layer_norm", "nn.rms_norm")]
    + [("nn.batch_norm", batch_norm), ("nn.matmul", matmul), ("nn.conv2d", conv2d)]
    + [(op, partial(pool, op=op)) for op in ("nn.max_pool2d", "nn.avg_pool2d")]
    + [("nn.reshape", reshape), ("nn.broadcast_to", broadcast_to),
       ("nn.transpose", transpose), ("nn.slice", slice_), ("nn.concat", concat),
       ("nn.gather", gather)]
)
# Elementwise ops are cheap and fuse with everything: draw them more often.
WEIGHTS: list[float] = [1.0 if name in UNARY else 2.0 if name in BINARY else 1.5
                        for name, _ in OPS]
