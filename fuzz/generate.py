"""Random `nn` programs over every op of the dialect.

`random_graph(rng, config)` builds one function: a DAG of 1..`max_ops` ops
whose operands are earlier values (recent ones preferred, so chains form) or
fresh arguments, with NumPy broadcasting, several outputs, reductions over
random axes, layout ops, matmul/conv/pool and f32/f16 element types (or one
forced type, `GenConfig.dtype`: f16 or bf16 for the whole program). Shapes are
tiny (the simulator runs one Python thread per GPU thread) unless
`GenConfig.large_dim` lets axes grow, within `max_elements` per tensor.

Operands whose domain is positive (log, sqrt, rsqrt, reciprocal, divisors, pow
bases) are values known to be positive (exp, sigmoid, softmax, ...) or
arguments, which `fusec.reference.interpreter.random_inputs` then draws from
[0.5, 2) because they feed such an operand directly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from fusec.dialects import shapes
from fusec.fuzz.graph import Arg, Graph, Node, TType
from fusec.fuzz.names import function_name, value_names

T = TypeVar("T")


@dataclass(frozen=True)
class GenConfig:
    """How big and how varied the programs are."""

    max_ops: int = 10
    max_dim: int = 4
    max_rank: int = 4
    max_outputs: int = 4
    f16_rate: float = 0.3  # programs whose main element type is f16
    zero_dim_rate: float = 0.0  # fresh arguments with a zero-size dimension
    dtype: str = ""  # the element type of every program ("" draws f32 or f16)
    large_dim: int = 0  # when > 0, axes of fresh shapes may grow up to this size
    max_elements: int = 1 << 22  # ... within this many elements per shape


# Operand positions that need positive values, by op (as in the reference).
POSITIVE_SLOTS = {"nn.log": 0, "nn.sqrt": 0, "nn.rsqrt": 0, "nn.reciprocal": 0,
                  "nn.div": 1, "nn.pow": 0}
# Ops whose result is positive whatever the operand (or for a positive operand).
_POSITIVE_RESULT = {"nn.exp", "nn.sigmoid", "nn.softmax"}
_POSITIVE_OF_POSITIVE = {"nn.sqrt", "nn.rsqrt", "nn.reciprocal", "nn.add", "nn.mul", "nn.div",
                         "nn.reduce_sum", "nn.reduce_max", "nn.reduce_min", "nn.reduce_mean",
                         "nn.reshape", "nn.broadcast_to", "nn.transpose", "nn.slice",
                         "nn.concat", "nn.max_pool2d", "nn.avg_pool2d", "nn.max", "nn.min"}


class Builder:
    """The program under construction and the random choices that grow it."""

    def __init__(self, rng: np.random.Generator, config: GenConfig) -> None:
        self.rng = rng
        self.config = config
        self.dtype = "f16" if rng.random() < config.f16_rate else "f32"
        self.dtype = config.dtype or self.dtype
        self.args: list[Arg] = []
        self.nodes: list[Node] = []
        self.types: dict[str, TType] = {}
        self.positive: set[str] = set()

    # --- randomness ----------------------------------------------------------------

    def chance(self, p: float) -> bool:
        """True with probability `p`."""
        return bool(self.rng.random() < p)

    def int(self, lo: int, hi: int) -> int:
        """A random integer in [lo, hi]."""
        return int(self.rng.integers(lo, hi + 1))

    def choice(self, items: list[T]) -> T:
        """One of `items`."""
        return items[int(self.rng.integers(len(items)))]

    def shape(self, rank: int | None = None) -> tuple[int, ...]:
        """A tiny random shape (rank 0..max_rank, mostly 1..3)."""
        if rank is None:
            rank = self.choice([0, 1, 1, 2, 2, 2, 3, 3, 4][: 5 + self.config.max_rank])
        dims = [self.int(1, self.config.max_dim) for _ in range(rank)]
        if self.config.large_dim and dims:
            dims = self._grown(dims)
        if dims and self.chance(self.config.zero_dim_rate):
            dims[self.int(0, rank - 1)] = 0
        return tuple(dims)

    def _grown(self, dims: list[int]) -> list[int]:
        """`dims` with one or two axes drawn up to `large_dim` (log-uniform,
        so that sizes near block boundaries and odd sizes both come), then
        the largest axes halved until the shape fits `max_elements`."""
        for i in self.rng.permutation(len(dims))[: self.int(1, 2)]:
            dims[int(i)] = int(np.exp(self.rng.uniform(0, np.log(self.config.large_dim))))
            dims[int(i)] = max(1, dims[int(i)] + self.int(-1, 1))
        while int(np.prod(dims)) > self.config.max_elements:
            big = int(np.argmax(dims))
            dims[big] = max(1, dims[big] // 2)
        return dims

    # --- values --------------------------------------------------------------------

    def new_arg(self, t: TType) -> str:
        """A fresh function argument of type `t`."""
        name = f"a{len(self.args)}"
        self.args.append(Arg(name, t))
        self.types[name] = t
        return name

    def emit(self, op: str, operands: list[str], t: TType, attrs: str = "",
             same_type: bool = False) -> str:
        """Append an op and return its result's name."""
        name = f"n{len(self.nodes)}"
        self.nodes.append(Node(name, op, tuple(operands), t, attrs, same_type))
        self.types[name] = t
        if self._positive_result(op, operands, attrs):
            self.positive.add(name)
        return name

    def _positive_result(self, op: str, operands: list[str], attrs: str) -> bool:
        if op in _POSITIVE_RESULT:
            return True
        if op == "nn.clamp":
            return "min = 0.5" in attrs
        return op in _POSITIVE_OF_POSITIVE and bool(operands) and all(
            o in self.positive for o in operands)

    def pick(self, accept: Callable[[TType], bool] = lambda t: True) -> str | None:
        """An existing value whose type passes `accept`, recent ones likelier."""
        names = [n for n, t in self.types.items() if accept(t)]
        if not names:
            return None
        weights = np.arange(1, len(names) + 1, dtype=float) ** 2
        return names[int(self.rng.choice(len(names), p=weights / weights.sum()))]

    def float_value(self, min_rank: int = 0, rank: int | None = None) -> str:
        """An existing float value (or a fresh argument) of at least `min_rank`."""
        def ok(t: TType) -> bool:
            fits = len(t.shape) >= min_rank if rank is None else len(t.shape) == rank
            return t.is_float and fits
        found = self.pick(ok) if self.chance(0.85) else None
        if found is not None:
            return found
        r = rank if rank is not None else max(min_rank, len(self.shape()))
        return self.new_arg(TType(self.shape(min(r, 4)), self.dtype))

    def positive_value(self, dtype: str, like: tuple[int, ...] | None = None) -> str:
        """A value known to be positive (or an argument, drawn positive)."""
        def ok(t: TType) -> bool:
            fits = like is None or _broadcasts(t.shape, like)
            return t.dtype == dtype and fits
        names = [n for n in self.types if ok(self.types[n])
                 and (n in self.positive or any(a.name == n for a in self.args))]
        if names and self.chance(0.7):
            return self.choice(names)
        return self.new_arg(TType(self.partner_shape(like) if like is not None
                                  else self.shape(), dtype))

    def partner_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A shape that broadcasts with `shape` (same, fewer dims, 1s, or more dims)."""
        kind = self.int(0, 3)
        if kind == 0 or not shape:
            return shape if kind == 0 else self.shape(self.int(0, 2))
        if kind == 1:
            return shape[self.int(0, len(shape)):]
        if kind == 2:
            return tuple(1 if self.chance(0.5) else d for d in shape)
        return (self.int(1, 3), *shape) if len(shape) < 4 else shape

    def partner(self, x: str, positive: bool = False) -> str:
        """A second operand of x's element type that broadcasts with it."""
        t = self.types[x]
        if positive:
            return self.positive_value(t.dtype, t.shape)
        if self.chance(0.15):
            return self.constant(TType(self.partner_shape(t.shape), t.dtype))
        found = self.pick(lambda u: u.dtype == t.dtype and _broadcasts(u.shape, t.shape))
        if found is not None and self.chance(0.6):
            return found
        return self.new_arg(TType(self.partner_shape(t.shape), t.dtype))

    def constant(self, t: TType, positive: bool = False) -> str:
        """An `nn.constant`: a splat or every element written out."""
        n = int(np.prod(t.shape, dtype=np.int64))
        lo = 0.5 if positive else -2.0
        values = np.round(self.rng.uniform(lo, 2.0, n), 3)
        if self.chance(0.5) or n == 0:
            literal = f"dense<{values[0] if n else 1.0}>"
        else:
            literal = f"dense<{_nested(values.reshape(t.shape).tolist())}>"
        name = self.emit("nn.constant", [], t, literal)
        if positive:
            self.positive.add(name)
        return name

    def finish(self, func_name: str, names: list[str]) -> Graph:
        """The program with outputs chosen and values given their final names."""
        graph = Graph(func_name, self.args, self.nodes, self.outputs())
        rename = dict(zip([a.name for a in self.args] + [n.name for n in self.nodes],
                          names, strict=True))
        return graph.renamed(rename)

    def outputs(self) -> list[str]:
        """The sinks (values nobody reads), a few others, now and then an argument."""
        used = {o for n in self.nodes for o in n.operands}
        sinks = [n.name for n in self.nodes if n.name not in used] or [self.nodes[-1].name]
        outs = sinks[-self.config.max_outputs:]
        for n in self.nodes:
            if n.name not in outs and len(outs) < self.config.max_outputs and self.chance(0.1):
                outs.append(n.name)
        if self.chance(0.05):
            outs.append(self.args[0].name)
        if self.chance(0.05):
            outs.append(outs[0])
        return outs


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    try:
        shapes.broadcast_shapes(a, b)
    except shapes.ShapeError:
        return False
    return True


def _nested(values: object) -> str:
    if isinstance(values, list):
        return "[" + ", ".join(_nested(v) for v in values) + "]"
    return repr(float(values))  # type: ignore[arg-type]


def random_graph(rng: np.random.Generator, config: GenConfig | None = None) -> Graph:
    """One random program (see the module docstring)."""
    from fusec.fuzz.ops import OPS, WEIGHTS

    b = Builder(rng, config or GenConfig())
    b.new_arg(TType(b.shape(), b.dtype))
    p = np.asarray(WEIGHTS, dtype=float)
    for _ in range(b.int(1, b.config.max_ops)):
        OPS[int(rng.choice(len(OPS), p=p / p.sum()))][1](b)
    names = value_names(rng, len(b.args) + len(b.nodes))
    return b.finish(function_name(rng), names)
