"""Greedy delta debugging of a failing program.

Each step proposes a smaller program and keeps it when the failure still
reproduces (same status, stage and kind of error), until no step helps:

1. drop one output (dead ops and arguments go with it);
2. bypass an op: its users read one of its operands of the same type instead;
3. cut an op: its result becomes a fresh function argument;
4. give the function and the values short names.

```python
small = minimize(graph, lambda g: check_text(g.text()).signature == signature)
```
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from fusec.fuzz.graph import Arg, Graph

Reproduces = Callable[[Graph], bool]
DEFAULT_BUDGET = 150  # checks; each compiles and simulates the program twice or more


def minimize(graph: Graph, reproduces: Reproduces, budget: int = DEFAULT_BUDGET) -> Graph:
    """The smallest program the greedy steps reach that still `reproduces`."""
    best = graph  # dropping dead code changes the inputs drawn: it is a step too
    tries = 0
    changed = True
    while changed and tries < budget:
        changed = False
        for candidate in _candidates(best):
            if tries >= budget:
                break
            tries += 1
            if _smaller(candidate, best) and reproduces(candidate):
                best, changed = candidate, True
                break  # propose again from the smaller program
    return best


def _smaller(a: Graph, b: Graph) -> bool:
    size = lambda g: (len(g.nodes), len(g.outputs), len(g.args),  # noqa: E731
                      len(g.text()))
    return size(a) < size(b)


def _candidates(g: Graph) -> Iterator[Graph]:
    yield g.without_dead_code()
    for i in range(len(g.outputs)):
        if len(g.outputs) > 1:
            yield g.copy(outputs=g.outputs[:i] + g.outputs[i + 1:]).without_dead_code()
    for node in reversed(g.nodes):
        for operand in dict.fromkeys(node.operands):
            if g.types[operand] == node.type:
                yield _bypass(g, node.name, operand)
    for node in reversed(g.nodes):
        yield _cut(g, node.name)
    yield from _short_names(g)


def _bypass(g: Graph, name: str, operand: str) -> Graph:
    """Users of `name` read `operand` instead; `name` disappears."""
    nodes = [n for n in g.nodes if n.name != name]
    outputs = [operand if o == name else o for o in g.outputs]
    rewired = g.copy(nodes=nodes, outputs=outputs).renamed({name: operand})
    return rewired.without_dead_code()


def _cut(g: Graph, name: str) -> Graph:
    """The op defining `name` is replaced by a function argument."""
    nodes = [n for n in g.nodes if n.name != name]
    return g.copy(nodes=nodes, args=[*g.args, Arg(name, g.types[name])]).without_dead_code()


def _short_names(g: Graph) -> Iterator[Graph]:
    if g.func_name != "f":
        yield g.copy(func_name="f")
    values = [a.name for a in g.args] + [n.name for n in g.nodes]
    short = [f"v{i}" for i in range(len(values))]
    if values != short:
        yield g.renamed(dict(zip(values, short, strict=True)))
