"""Generated data-movement programs: the corpus `bench/data_movement.py` times.

Each program is one data-movement op (or chain of views) fused with
pointwise neighbours: a scale, shift, bias or activation before it, after
it, or both. Six families, each with variants (`FAMILIES`):

- `permute`: `nn.transpose` of a 2- to 5-D tensor by a uniformly drawn
  permutation (so every permutation of a 4-D tensor comes, the identity too);
- `view_chain`: reshape-transpose-reshape chains: channel shuffle, window
  partition and its reverse (Swin), head split and merge, pixel shuffle;
- `window_slice`: `nn.slice` windows: a crop, strided slices, a
  deinterleave (even and odd elements) and a stencil (two overlapping
  windows subtracted);
- `strided_window`: depthwise `nn.conv2d` with strides or dilations (1-D
  and 2-D kernels), max and average pools with strides;
- `gather`: `nn.gather` of embedding rows by token ids, of rows by a 1-D
  index, and of columns;
- `concat_split`: `nn.concat` of 2..4 parts, a split into 2..4 slices
  (several outputs), a roll (two slices concatenated the other way round)
  and an interleave of two tensors.

Program `index` of a seed belongs to family `index % 6`, its variant
rotates with `index // 6`; everything else (element type f32 or bf16,
permutation, axes, ops, strides) comes from one random source seeded with
(seed, index), the extents from another (`fuzz/movement_extents.py`): the
`small` program of a seed (a few hundred elements, for the simulator) is the
full one (at least `MIN_TRAFFIC` bytes that must move, as the bench's copy floor counts
them: `fuzz/movement_floor.py`) shrunk.

```python
for p in corpus(seed=0, count=48):
    print(p.name, p.traffic >> 20, "MiB")
    text = p.text  # nn text, for fusec
```
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fusec.dialects import shapes
from fusec.dialects.element_types import element
from fusec.fuzz.generate import Builder, GenConfig
from fusec.fuzz.graph import Graph, TType
from fusec.fuzz.movement_extents import Extents
from fusec.fuzz.movement_floor import floor_bytes

MIB = 1 << 20
# Bytes every full-size program must move (its floor), at least: far past the last
# level cache, so that a kernel's time is its DRAM traffic.
MIN_TRAFFIC = 64 * MIB
DEFAULT_COUNT = 48
DTYPES = ("f32", "bf16")

FAMILIES: dict[str, tuple[str, ...]] = {
    "permute": ("rank2", "rank3", "rank4", "rank5"),
    "view_chain": ("channel_shuffle", "window_partition", "window_reverse", "head_split",
                   "head_merge", "pixel_shuffle"),
    "window_slice": ("crop", "strided", "deinterleave", "stencil"),
    "strided_window": ("dw_conv_strided", "dw_conv_dilated", "dw_conv_1d", "max_pool",
                       "avg_pool"),
    "gather": ("embedding", "rows", "columns"),
    "concat_split": ("concat", "split", "roll", "interleave"),
}
_ACTIVATIONS = ("nn.relu", "nn.silu", "nn.sigmoid", "nn.tanh", "nn.gelu")
_FACTORS = ("0.5", "1.25", "-0.75", "2.0", "0.125")  # exact in bf16


@dataclass(frozen=True)
class MovementProgram:
    """One program of the corpus: its name, family, variant, element type,
    the program, and the bytes it must move (`traffic_bytes`)."""

    name: str
    family: str
    variant: str
    dtype: str
    graph: Graph
    traffic: int

    @property
    def text(self) -> str:
        """The program as `nn` text."""
        return self.graph.text()

    def shapes(self) -> str:
        """`4x5xf32, 7xi32 -> 5x4xf32`: its arguments' and results' types."""
        def short(t: TType) -> str:
            return "x".join([*map(str, t.shape), t.dtype])
        ins = ", ".join(short(a.type) for a in self.graph.args)
        outs = ", ".join(short(self.graph.types[o]) for o in self.graph.outputs)
        return f"{ins} -> {outs}"


def corpus(seed: int = 0, count: int = DEFAULT_COUNT, small: bool = False) -> list[
        MovementProgram]:
    """Programs 0..count-1 of `seed` (module docstring)."""
    return [program(seed, i, small) for i in range(count)]


def program(seed: int, index: int, small: bool = False) -> MovementProgram:
    """Program `index` of `seed`, full size or `small`."""
    names = list(FAMILIES)
    family = names[index % len(names)]
    variants = FAMILIES[family]
    variant = variants[(index // len(names) + seed) % len(variants)]
    scale = 1.0
    for _ in range(8):  # full size: grow the extents until the traffic is enough
        b = Builder(np.random.default_rng([seed, index]), GenConfig(f16_rate=0.0))
        b.dtype = b.choice(list(DTYPES))
        ctx = _Context(b, Extents(np.random.default_rng([seed, index, int(small)]), small),
                       scale)
        outputs, detail = _BUILDERS[family](ctx, variant)
        name = f"dm{index:02d}_{family}_{detail or variant}_{b.dtype}"
        graph = Graph(name, b.args, b.nodes, outputs)
        moved = traffic_bytes(graph)
        if small or moved >= MIN_TRAFFIC:
            return MovementProgram(name, family, variant, b.dtype, graph, moved)
        scale *= 1.1 * MIN_TRAFFIC / moved
    raise AssertionError(f"program {index} of seed {seed} stays below {MIN_TRAFFIC} bytes")


def traffic_bytes(graph: Graph) -> int:
    """Bytes the program must move, as the bench's copy floor counts them
    (`fuzz/movement_floor.floor_bytes`): every input read once and every
    output written once, a gathered table at most the elements gathered, an
    input read only through slices the regions they cut."""
    from fusec.compiler.parsing import make_context, parse_module
    from fusec.reference.interpreter import find_function

    module = parse_module(make_context(), graph.text(), f"{graph.func_name}.mlir")
    return floor_bytes(find_function(module, None))


# --- building blocks ----------------------------------------------------------------


@dataclass
class _Context:
    """The program under construction (`b`, structure), its extents (`e`)
    and how far the full size is grown (`scale`)."""

    b: Builder
    e: Extents
    scale: float

    def elements(self, mib: float) -> int:
        """The elements of `mib` MiB of the program's element type, grown."""
        return math.ceil(mib * MIB * self.scale / element(self.b.dtype).width)

    def arg(self, shape: tuple[int, ...], dtype: str = "") -> str:
        """A fresh argument."""
        return self.b.new_arg(TType(tuple(shape), dtype or self.b.dtype))

    def shape(self, value: str) -> tuple[int, ...]:
        """The shape of `value`."""
        return self.b.types[value].shape

    def sides(self) -> tuple[bool, bool]:
        """Pointwise ops before the move, after it, or both."""
        side = self.b.choice(["before", "after", "both"])
        return side != "after", side != "before"

    def pointwise(self, x: str) -> str:
        """`x` through a scale, shift, per-axis bias or activation (or a scale
        then an activation)."""
        b, t = self.b, self.b.types[x]
        kind = b.choice(["scale", "shift", "bias", "act", "scale_act"])
        if kind in ("scale", "shift", "scale_act"):
            c = b.emit("nn.constant", [], t.with_shape(()), f"dense<{b.choice(list(_FACTORS))}>")
            x = b.emit("nn.add" if kind == "shift" else "nn.mul", [x, c], t)
        if kind == "bias":
            axis = b.int(0, len(t.shape) - 1)
            bias = self.arg((t.shape[axis],) + (1,) * (len(t.shape) - 1 - axis))
            x = b.emit("nn.add", [x, bias], t)
        if kind in ("act", "scale_act"):
            act = b.choice(list(_ACTIVATIONS))
            attrs = '{approximate = "tanh"}' if act == "nn.gelu" and b.chance(0.5) else ""
            x = b.emit(act, [x], t, attrs, same_type=True)
        return x

    def before(self, x: str, pre: bool) -> str:
        """`x`, through pointwise ops when `pre`."""
        return self.pointwise(x) if pre else x

    def transpose(self, x: str, perm: list[int]) -> str:
        """nn.transpose of `x` by `perm`."""
        t = self.b.types[x]
        return self.b.emit("nn.transpose", [x], t.with_shape(tuple(t.shape[p] for p in perm)),
                           f"{{perm = {_ints(perm)}}}")

    def reshape(self, x: str, shape: tuple[int, ...]) -> str:
        """nn.reshape of `x` to `shape`."""
        return self.b.emit("nn.reshape", [x], self.b.types[x].with_shape(tuple(shape)))

    def slice(self, x: str, starts: list[int], limits: list[int],
              strides: list[int] | None = None) -> str:
        """nn.slice of `x` (strides written only when one is not 1)."""
        t = self.b.types[x]
        steps = strides or [1] * len(starts)
        out = shapes.slice_shape(t.shape, starts, limits, steps)
        attrs = f"starts = {_ints(starts)}, limits = {_ints(limits)}"
        if any(s != 1 for s in steps):
            attrs += f", strides = {_ints(steps)}"
        return self.b.emit("nn.slice", [x], t.with_shape(out), "{" + attrs + "}")

    def concat(self, parts: list[str], axis: int) -> str:
        """nn.concat of `parts` along `axis`."""
        t = self.b.types[parts[0]]
        out = shapes.concat_shape([self.b.types[p].shape for p in parts], axis)
        return self.b.emit("nn.concat", parts, t.with_shape(out), f"{{axis = {axis}}}")


def _ints(values: list[int]) -> str:
    return "[" + ", ".join(map(str, values)) + "]"


def _chain(c: _Context, shape: tuple[int, ...], views: list[tuple[int, ...] | list[int]],
           ) -> tuple[list[str], str]:
    """An argument of `shape`, then views in order (a tuple: reshape to it;
    a list: transpose by it), with pointwise ops before and/or after."""
    pre, post = c.sides()
    x = c.before(c.arg(shape), pre)
    for view in views:
        x = c.transpose(x, view) if isinstance(view, list) else c.reshape(x, view)
    return [c.pointwise(x) if post else x], ""


# --- the families ---------------------------------------------------------------------


def _permute(c: _Context, variant: str) -> tuple[list[str], str]:
    rank = int(variant.removeprefix("rank"))
    perm = [int(i) for i in c.b.rng.permutation(rank)]
    shape = c.e.shape(rank, c.elements(34))
    outputs, _ = _chain(c, shape, [perm])
    return outputs, "p" + "".join(map(str, perm))


def _view_chain(c: _Context, variant: str) -> tuple[list[str], str]:
    e, n = c.e, c.elements(34)
    if variant == "channel_shuffle":
        g = e.pick([2, 3], [2, 3, 4, 8])
        nn_, g, cg, h, w = e.shape(5, n, fixed={1: g})
        return _chain(c, (nn_, g * cg, h, w), [(nn_, g, cg, h, w), [0, 2, 1, 3, 4],
                                                (nn_, g * cg, h, w)])
    if variant in ("window_partition", "window_reverse"):
        ws = e.pick([2, 3], [4, 7, 8])
        bb, nh, _, nw, _, ch = e.shape(6, n, fixed={2: ws, 4: ws})
        six = (bb, nh, ws, nw, ws, ch)
        windows = (bb * nh * nw, ws * ws, ch)
        if variant == "window_partition":
            return _chain(c, (bb, nh * ws, nw * ws, ch), [six, [0, 1, 3, 2, 4, 5], windows])
        return _chain(c, windows, [(bb, nh, nw, ws, ws, ch), [0, 1, 3, 2, 4, 5],
                                   (bb, nh * ws, nw * ws, ch)])
    if variant in ("head_split", "head_merge"):
        heads = e.pick([2, 3], [8, 12, 16])
        bb, s, _, dh = e.shape(4, n, fixed={2: heads})
        if variant == "head_split":
            return _chain(c, (bb, s, heads * dh), [(bb, s, heads, dh), [0, 2, 1, 3]])
        return _chain(c, (bb, heads, s, dh), [[0, 2, 1, 3], (bb, s, heads * dh)])
    r = e.pick([2, 3], [2, 3])  # pixel shuffle (depth to space)
    nn_, ch, _, _, h, w = e.shape(6, n, fixed={2: r, 3: r})
    return _chain(c, (nn_, ch * r * r, h, w), [(nn_, ch, r, r, h, w), [0, 1, 4, 2, 5, 3],
                                               (nn_, ch, h * r, w * r)])


def _window_slice(c: _Context, variant: str) -> tuple[list[str], str]:
    b, e = c.b, c.e
    rank = b.int(2, 4)
    axis = b.int(0, rank - 1)
    pre, post = c.sides()
    shape = e.shape(rank, c.elements(44))
    x = c.before(c.arg(shape), pre)
    if variant == "crop":
        starts = [e.int(0, d // 4) for d in shape]
        y = c.slice(x, starts, [d - e.int(0, d // 4) for d in shape])
    elif variant == "strided":
        steps = [b.choice([1, 1, 2, 3]) for _ in shape]
        steps[axis] = max(steps[axis], 2)
        y = c.slice(x, [e.int(0, min(2, d - 1)) for d in shape], list(shape), steps)
    else:
        n = shape[axis]
        lo = [0] * rank
        hi = list(shape)
        if variant == "deinterleave":  # x[..., 0:m:2] and x[..., 1:m+1:2], the same size
            m = n - 1 if n % 2 else n
            first = c.slice(x, lo, _at(hi, axis, m), _at([1] * rank, axis, 2))
            second = c.slice(x, _at(lo, axis, 1), _at(hi, axis, m), _at([1] * rank, axis, 2))
        else:  # stencil: x[k:] - x[:-k]
            k = e.int(1, min(3, n - 1))
            first = c.slice(x, _at(lo, axis, k), hi)
            second = c.slice(x, lo, _at(hi, axis, n - k))
        if b.chance(0.5):
            return [c.pointwise(first), c.pointwise(second)], ""
        t = b.types[first]
        y = b.emit("nn.sub" if variant == "stencil" else "nn.add", [first, second], t)
    return [c.pointwise(y) if post else y], ""


def _at(values: list[int], axis: int, value: int) -> list[int]:
    """`values` with `values[axis] = value`."""
    return [value if i == axis else v for i, v in enumerate(values)]


def _strided_window(c: _Context, variant: str) -> tuple[list[str], str]:
    b = c.b
    pre, post = c.sides()
    shape = c.e.shape(4, c.elements(48), least=(1, 2, 5, 5))
    x = c.before(c.arg(shape), pre)
    t, ch = b.types[x], shape[1]
    if variant.startswith("dw_conv"):
        k = b.choice([3, 5])
        kh, kw = (1, k) if variant == "dw_conv_1d" else (k, k)
        dil = b.choice([2, 3]) if variant == "dw_conv_dilated" else 1
        stride = 1 if variant == "dw_conv_dilated" else 2
        pads = [dil * (kh - 1) // 2, dil * (kw - 1) // 2] * 2
        w = c.arg((ch, 1, kh, kw))
        dils = [1, dil] if kh == 1 else [dil, dil]
        strides = [1, stride] if kh == 1 else [stride, stride]
        out = shapes.conv2d_shape(shape, (ch, 1, kh, kw), strides, pads, dils, ch)
        y = b.emit("nn.conv2d", [x, w], t.with_shape(out),
                   f"{{strides = {_ints(strides)}, pads = {_ints(pads)}, "
                   f"dilations = {_ints(dils)}, groups = {ch}}}")
    else:
        k = b.choice([2, 3])
        pads = [(k - 1) // 2] * 4 if variant == "avg_pool" else [0] * 4
        out = shapes.pool2d_shape(shape, [k, k], [2, 2], pads)
        op = "nn.max_pool2d" if variant == "max_pool" else "nn.avg_pool2d"
        y = b.emit(op, [x], t.with_shape(out),
                   f"{{kernel = [{k}, {k}], strides = [2, 2], pads = {_ints(pads)}}}")
    return [c.pointwise(y) if post else y], ""


def _gather(c: _Context, variant: str) -> tuple[list[str], str]:
    b, e = c.b, c.e
    ids_type = b.choice(["i32", "i64"])
    vocab = e.pick([7, 11, 13], [30011, 32000, 50257, 65521])
    # The row width (the gathered columns' count for `columns`) as models have it.
    width = e.pick([8, 12, 13], [96, 256, 257, 768, 1000, 1024, 1031, 2048, 4096])
    if variant == "columns":  # x[:, ids]
        m, k = e.shape(2, c.elements(34), fixed={0: e.pick([2, 3, 5], [64, 127, 257, 512])})
        table = c.arg((m, vocab))
        ids = c.arg((k,), ids_type)
        y = b.emit("nn.gather", [table, ids], b.types[table].with_shape((m, k)), "{axis = 1}")
        return [c.pointwise(y)], ""
    if variant == "rows":  # table[ids] of a 1-D index
        (rows, _) = e.shape(2, c.elements(34), fixed={1: width})
        table = c.arg((vocab, width))
        ids = c.arg((rows,), ids_type)
        y = b.emit("nn.gather", [table, ids], b.types[table].with_shape((rows, width)),
                   "{axis = 0}")
        return [c.pointwise(y)], ""
    bb, s, d = e.shape(3, c.elements(34), fixed={2: width})  # embedding + positions
    table = c.arg((vocab, d))
    ids = c.arg((bb, s), ids_type)
    t = b.types[table]
    y = b.emit("nn.gather", [table, ids], t.with_shape((bb, s, d)), "{axis = 0}")
    root = b.emit("nn.constant", [], t.with_shape(()), f"dense<{b.choice(list(_FACTORS))}>")
    y = b.emit("nn.mul", [y, root], t.with_shape((bb, s, d)))
    y = b.emit("nn.add", [y, c.arg((s, d))], t.with_shape((bb, s, d)))
    return [c.pointwise(y) if b.chance(0.5) else y], ""


def _concat_split(c: _Context, variant: str) -> tuple[list[str], str]:
    b, e = c.b, c.e
    rank = b.int(2, 4)
    axis = b.int(0, rank - 1)
    pre, post = c.sides()
    parts = b.int(2, 4)
    shape = e.shape(rank, c.elements(34), least=tuple(parts + 1 if i == axis else 2
                                                      for i in range(rank)))
    n = shape[axis]
    cuts = sorted(int(v) for v in e.rng.choice(np.arange(1, n), parts - 1, replace=False))
    bounds = [0, *cuts, n]
    if variant == "concat":
        ins = [c.before(c.arg(_at(list(shape), axis, hi - lo)), pre and b.chance(0.7))
               for lo, hi in itertools.pairwise(bounds)]
        y = c.concat(ins, axis)
    elif variant == "interleave":  # (..., n) and (..., n) -> (..., 2n), alternating
        last = rank - 1
        ins = [c.before(c.arg(shape), pre and b.chance(0.7)) for _ in range(2)]
        col = [c.reshape(x, (*shape, 1)) for x in ins]
        y = c.reshape(c.concat(col, last + 1), (*shape[:last], 2 * shape[last]))
    else:
        x = c.before(c.arg(shape), pre)
        lo = [0] * rank
        if variant == "split":
            pieces = [c.slice(x, _at(lo, axis, s), _at(list(shape), axis, t))
                      for s, t in itertools.pairwise(bounds)]
            return [c.pointwise(p) if post or b.chance(0.5) else p for p in pieces], ""
        shift = cuts[0]  # roll by `shift` along the axis
        tail = c.slice(x, _at(lo, axis, shift), list(shape))
        head = c.slice(x, lo, _at(list(shape), axis, shift))
        y = c.concat([tail, head], axis)
    return [c.pointwise(y) if post else y], ""


_BUILDERS: dict[str, Callable[[_Context, str], tuple[list[str], str]]] = {
    "permute": _permute, "view_chain": _view_chain, "window_slice": _window_slice,
    "strided_window": _strided_window, "gather": _gather, "concat_split": _concat_split,
}
