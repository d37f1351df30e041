"""Programs whose values have several consumers, some reading through
gather, transpose, reshape, slice or broadcast chains: the `recompute` mode's
generator (fusion may recompute a value in each consumer's kernel, or must
refuse to).

A shared value (one or two pointwise ops on arguments, now and then a
reduction) gets two to four consumers: a pointwise op or a reduction reading
it directly, or through a chain of one to three layout ops, and now and then
a pointwise op combining a direct and an indirect read. Now and then a
consumer is dead (computed, not returned), as dead users that block a pass
before `dce` drops them.

```python
graph = reuse_graph(np.random.default_rng(1), GenConfig())
```
"""

from __future__ import annotations

import numpy as np

from fusec.dialects import shapes
from fusec.fuzz.generate import Builder, GenConfig
from fusec.fuzz.graph import Graph, TType
from fusec.fuzz.names import function_name, value_names
from fusec.fuzz.ops import _ints

_POINTWISE = ("nn.exp", "nn.tanh", "nn.neg", "nn.abs", "nn.sigmoid", "nn.relu", "nn.silu")
_REDUCE = ("nn.reduce_sum", "nn.reduce_max", "nn.reduce_mean")


def reuse_graph(rng: np.random.Generator, config: GenConfig) -> Graph:
    """One program of a shared value and its direct and indirect readers."""
    b = Builder(rng, config)
    x = b.new_arg(TType(b.shape(b.int(1, 3)) if b.chance(0.5) else
                        (b.int(1, 4), b.int(2, 4)), b.dtype))
    v = b.emit(b.choice(list(_POINTWISE)), [x], b.types[x], same_type=True)
    if b.chance(0.4):
        y = b.new_arg(b.types[x])
        v = b.emit(b.choice(["nn.mul", "nn.add", "nn.sub"]), [v, y], b.types[x])
    ends: list[str] = []
    for _ in range(b.int(2, 4)):
        read = _view_chain(b, v) if b.chance(0.6) else v
        ends.append(_consume(b, read, v))
    graph = _finish(b, rng)
    if len(ends) > 1 and b.chance(0.25):  # a dead consumer
        dead = b.choice(ends)
        index = [n.name for n in b.nodes].index(dead)
        renamed = graph.nodes[index].name
        kept = [o for o in graph.outputs if o != renamed]
        if kept:
            graph = graph.copy(outputs=kept)
    return graph


def _finish(b: Builder, rng: np.random.Generator) -> Graph:
    names = value_names(rng, len(b.args) + len(b.nodes))
    return b.finish(function_name(rng), names)


def _view_chain(b: Builder, v: str) -> str:
    """`v` read through one to three layout ops."""
    for _ in range(b.int(1, 3)):
        t = b.types[v]
        kind = b.choice(["gather", "transpose", "reshape", "slice", "broadcast"])
        if kind == "gather" and t.shape:
            axis = b.int(0, len(t.shape) - 1)
            ids = b.new_arg(TType(b.shape(b.int(0, 2)), b.choice(["i64", "i32"])))
            out = shapes.gather_shape(t.shape, b.types[ids].shape, axis)
            v = b.emit("nn.gather", [v, ids], t.with_shape(out), f"{{axis = {axis}}}")
        elif kind == "transpose" and len(t.shape) >= 2:
            perm = [int(i) for i in b.rng.permutation(len(t.shape))]
            v = b.emit("nn.transpose", [v], t.with_shape(tuple(t.shape[p] for p in perm)),
                       f"{{perm = {_ints(perm)}}}")
        elif kind == "slice" and t.shape and min(t.shape) >= 2:
            starts = [b.int(0, 1) for _ in t.shape]
            limits = list(t.shape)
            out = shapes.slice_shape(t.shape, starts, limits, [1] * len(t.shape))
            v = b.emit("nn.slice", [v], t.with_shape(out),
                       f"{{starts = {_ints(starts)}, limits = {_ints(limits)}}}")
        elif kind == "broadcast" and len(t.shape) < 4:
            v = b.emit("nn.broadcast_to", [v], t.with_shape((b.int(2, 3), *t.shape)))
        else:
            n = int(np.prod(t.shape, dtype=np.int64))
            dims = (n,) if len(t.shape) != 1 else (1, n)
            v = b.emit("nn.reshape", [v], t.with_shape(dims))
    return v


def _consume(b: Builder, read: str, shared: str) -> str:
    """A reduction or pointwise op of `read`, or one combining `read` with
    `shared` when their shapes broadcast."""
    t = b.types[read]
    u = b.types[shared]
    try:
        both = shapes.broadcast_shapes(t.shape, u.shape) if read != shared else None
    except shapes.ShapeError:
        both = None
    if both is not None and b.chance(0.5):
        pair = [read, shared] if b.chance(0.5) else [shared, read]
        return b.emit(b.choice(["nn.mul", "nn.add", "nn.max"]), pair, t.with_shape(both))
    if t.shape and b.chance(0.5):
        rank = len(t.shape)
        axes = sorted(int(a) for a in b.rng.choice(rank, b.int(1, rank), replace=False))
        keep = b.chance(0.5)
        out = shapes.reduced_shape(t.shape, tuple(axes), keep)
        return b.emit(b.choice(list(_REDUCE)), [read], t.with_shape(out),
                      f"{{axes = {_ints(axes)}, keepdims = {'true' if keep else 'false'}}}")
    if t.shape and b.chance(0.3):
        return b.emit("nn.softmax", [read], t, f"{{axis = {len(t.shape) - 1}}}",
                      same_type=True)
    return b.emit(b.choice(list(_POINTWISE)), [read], t, same_type=True)
