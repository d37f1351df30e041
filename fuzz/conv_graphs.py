"""Programs built around conv2d: the `conv` mode's generator.

One to three stages, each a conv2d with random strides, pads, dilations and
groups, then (each likely, none certain) batch norm, an activation, pooling
and a residual add when the shapes allow one; now and then a reduction or a
flatten and matmul at the end, as a classifier head.

```python
graph = conv_graph(np.random.default_rng(1), GenConfig())
```
"""

from __future__ import annotations

import numpy as np

from fusec.dialects import shapes
from fusec.fuzz.generate import Builder, GenConfig
from fusec.fuzz.graph import Graph, TType
from fusec.fuzz.names import function_name, value_names
from fusec.fuzz.ops import _ints, _window_attrs, conv2d_of

_ACTIVATIONS = ("nn.relu", "nn.silu", "nn.sigmoid", "nn.tanh", "nn.gelu", "nn.clamp")


def conv_graph(rng: np.random.Generator, config: GenConfig) -> Graph:
    """One conv / batch-norm / activation / pool program (module docstring)."""
    b = Builder(rng, config)
    side = max(3, config.max_dim + 1)
    x = b.new_arg(TType((b.int(1, 2), b.choice([1, 2, 3, 4]), b.int(2, side), b.int(2, side)),
                        b.dtype))
    for _ in range(b.int(1, 3)):
        x = _stage(b, x)
    if b.chance(0.3):
        op = b.choice(["nn.reduce_mean", "nn.reduce_sum", "nn.reduce_max"])
        axes = b.choice([[2, 3], [1], [1, 2, 3], [0, 2, 3]])
        keep = b.chance(0.5)
        out = shapes.reduced_shape(b.types[x].shape, tuple(axes), keep)
        b.emit(op, [x], b.types[x].with_shape(out),
               f"{{axes = {_ints(axes)}, keepdims = {'true' if keep else 'false'}}}")
    names = value_names(rng, len(b.args) + len(b.nodes))
    return b.finish(function_name(rng), names)


def _stage(b: Builder, x: str) -> str:
    """conv2d of `x`, then maybe batch norm, an activation, a residual add
    and a pool; the stage's last value."""
    y = _conv(b, x)
    if b.chance(0.7):
        t = b.types[y]
        c = t.with_shape((t.shape[1],))
        params = [b.new_arg(c) for _ in range(3)] + [b.positive_value(t.dtype, (t.shape[1],))]
        if b.types[params[3]].shape != (t.shape[1],):
            params[3] = b.new_arg(c)
        y = b.emit("nn.batch_norm", [y, *params], t, b.choice(["", "{epsilon = 1.0e-03}"]))
    if b.chance(0.8):
        act = b.choice(list(_ACTIVATIONS))
        attrs = {"nn.gelu": b.choice(["", '{approximate = "tanh"}']),
                 "nn.clamp": b.choice(["{min = 0.0, max = 6.0}", "{min = -1.0, max = 1.0}"]),
                 }.get(act, "")
        y = b.emit(act, [y], b.types[y], attrs, same_type=True)
    if b.types[x].shape == b.types[y].shape and b.chance(0.6):
        y = b.emit("nn.add", [y, x], b.types[y])
    if b.chance(0.6):
        y = _pool(b, y)
    return y


def _conv(b: Builder, x: str) -> str:
    t = b.types[x]
    c = t.shape[1]
    return conv2d_of(b, x, (1, 2, 3, 4, c), lambda groups: 3 if groups < 4 else 1)


def _pool(b: Builder, x: str) -> str:
    t = b.types[x]
    h, w = t.shape[2:]
    kernel = [b.int(1, min(3, h)), b.int(1, min(3, w))]
    strides, pads, _ = _window_attrs(b, h, w, kernel[0], kernel[1], pool=True)
    out = shapes.pool2d_shape(t.shape, kernel, strides, pads)
    op = b.choice(["nn.max_pool2d", "nn.avg_pool2d"])
    attrs = f"{{kernel = {_ints(kernel)}, strides = {_ints(strides)}, pads = {_ints(pads)}}}"
    return b.emit(op, [x], t.with_shape(out), attrs)
