"""The fuzzer's program model: one function, a list of ops in SSA order.

It is deliberately tiny and independent of xDSL so that the generator and the
minimizer can build and cut programs freely; `Graph.text()` prints the `nn`
text that fusec then parses (so the text path is fuzzed too).

```python
g = Graph("f", [Arg("x", TType((4,), "f32"))],
          [Node("y", "nn.exp", ("x",), TType((4,), "f32"), same_type=True)], ["y"])
print(g.text())
```
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from fusec.fuzz.names import symbol


@dataclass(frozen=True)
class TType:
    """A ranked tensor type: `TType((4, 8), "f32")` is `tensor<4x8xf32>`."""

    shape: tuple[int, ...]
    dtype: str

    def text(self) -> str:
        """The builtin tensor type as written in `nn` text."""
        return "tensor<" + "".join(f"{d}x" for d in self.shape) + self.dtype + ">"

    def with_shape(self, shape: tuple[int, ...]) -> TType:
        """The same element type with another shape."""
        return TType(tuple(shape), self.dtype)

    @property
    def is_float(self) -> bool:
        """f16, bf16, f32 or f64."""
        return self.dtype.startswith(("f", "bf"))


@dataclass(frozen=True)
class Arg:
    """A function argument (an input)."""

    name: str
    type: TType


@dataclass(frozen=True)
class Node:
    """One op with one result. `attrs` is the printed attribute dictionary
    (or, for `nn.constant`, the dense literal); `same_type` selects the short
    `: T` form."""

    name: str
    op: str
    operands: tuple[str, ...]
    type: TType
    attrs: str = ""
    same_type: bool = False


@dataclass
class Graph:
    """A function: arguments, ops in order, and the values it returns."""

    func_name: str
    args: list[Arg]
    nodes: list[Node]
    outputs: list[str]
    types: dict[str, TType] = field(default_factory=dict[str, TType])

    def __post_init__(self) -> None:
        self.types = {a.name: a.type for a in self.args} | {n.name: n.type for n in self.nodes}

    def copy(self, **changes: object) -> Graph:
        """A copy with some fields replaced (lists are copied, nodes are immutable)."""
        fields: dict[str, object] = {
            "func_name": self.func_name, "args": list(self.args),
            "nodes": list(self.nodes), "outputs": list(self.outputs),
        }
        fields.update(changes)
        return Graph(**fields)  # type: ignore[arg-type]

    def text(self) -> str:
        """The program as `nn` text."""
        args = ", ".join(f"%{a.name}: {a.type.text()}" for a in self.args)
        results = ", ".join(self.types[o].text() for o in self.outputs)
        lines = [f"func.func {symbol(self.func_name)}({args}) -> ({results}) {{"]
        lines += [f"  {_node_text(n, self.types)}" for n in self.nodes]
        outs = ", ".join(f"%{o}" for o in self.outputs)
        lines += [f"  func.return {outs} : {results}", "}", ""]
        return "\n".join(lines)

    def without_dead_code(self) -> Graph:
        """Drop ops and arguments that no output depends on."""
        live = set(self.outputs)
        kept: list[Node] = []
        for node in reversed(self.nodes):
            if node.name in live:
                kept.append(node)
                live.update(node.operands)
        return self.copy(nodes=kept[::-1], args=[a for a in self.args if a.name in live])

    def renamed(self, rename: dict[str, str]) -> Graph:
        """The same program with values renamed (`rename` maps old to new)."""
        r = lambda v: rename.get(v, v)  # noqa: E731
        return self.copy(
            args=[Arg(r(a.name), a.type) for a in self.args],
            nodes=[dataclasses.replace(n, name=r(n.name), operands=tuple(map(r, n.operands)))
                   for n in self.nodes],
            outputs=[r(o) for o in self.outputs],
        )


def _node_text(node: Node, types: dict[str, TType]) -> str:
    if node.op == "nn.constant":
        return f"%{node.name} = nn.constant {node.attrs} : {node.type.text()}"
    operands = ", ".join(f"%{o}" for o in node.operands)
    attrs = f" {node.attrs}" if node.attrs else ""
    if node.same_type:
        sig = node.type.text()
    else:
        ins = ", ".join(types[o].text() for o in node.operands)
        sig = f"({ins}) -> {node.type.text()}"
    return f"%{node.name} = {node.op} {operands}{attrs} : {sig}"
