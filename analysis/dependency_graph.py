"""The analysis object fusion builds on: the ops of a function in program
order, their kinds and consumers, and the graph of groups fusion merges.

`DependencyAnalysis(func)` classifies every op of a function's body (its
`OpKind`), lists the consumers of every value, numbers the ops in program
order (a topological order, since every use follows its definition) and
answers reachability queries limited to an index window: a path from op `a`
to op `b` only visits ops whose index lies between theirs, so a query costs
the window, not the function. `FusionGraph` keeps the same order for groups
of ops while they are merged, which is how `form-fusion-groups` detects a
merge that would create a cycle through an op outside both groups.
The `dependency-analysis` pass (`passes/dependency_analysis.py`) prints what
it finds as `dep.*` attributes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, BlockArgument, Operation, OpResult, SSAValue
from xdsl.traits import IsTerminator

from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.dialects.element_types import BY_NAME
from fusec.dialects.nn_base import element_type_name
from fusec.dialects.shapes import numel

DEP_ATTR_PREFIX = "dep."



def _width(name: str) -> int:
    """Bytes per element of element type `name` (4 for one not in the table)."""
    row = BY_NAME.get(name)
    return row.width if row is not None else 4

def value_names(func: FuncOp) -> dict[SSAValue, str]:
    """`%name` of every value of `func`'s body as the printer spells it: the
    name hint, else the next number (numbering runs per function)."""
    names: dict[SSAValue, str] = {}
    counter = 0

    def visit(value: SSAValue) -> None:
        nonlocal counter
        if value.name_hint:
            names[value] = "%" + value.name_hint
        else:
            names[value] = f"%{counter}"
            counter += 1

    block = func.body.block
    for arg in block.args:
        visit(arg)
    for op in block.ops:
        for res in op.results:
            visit(res)
    return names


@dataclass
class DependencyAnalysis:
    """Kinds, consumers and ordered reachability of one function body.

    ```python
    dep = DependencyAnalysis(func)
    dep.kind[op]            # OpKind.ELEMENTWISE, ...
    dep.consumers(value)    # top-level ops reading it (func.return included)
    dep.reaches(a, b)       # is there a path a -> ... -> b ?
    ```
    """

    func: FuncOp
    ops: list[Operation] = field(init=False)
    index: dict[Operation, int] = field(init=False)
    kind: dict[Operation, OpKind] = field(init=False)
    names: dict[SSAValue, str] = field(init=False)
    live: set[Operation] = field(init=False)
    _consumers: dict[SSAValue, list[Operation]] = field(init=False)
    _nbytes: dict[SSAValue, int] = field(init=False, default_factory=dict[SSAValue, int])
    _dtype: dict[SSAValue, str] = field(init=False, default_factory=dict[SSAValue, str])

    def __post_init__(self) -> None:
        block = self.func.body.block
        self.ops = [op for op in block.ops if not op.has_trait(IsTerminator)]
        self.index = {op: i for i, op in enumerate(self.ops)}
        self.kind = {op: op_kind(op) for op in self.ops}
        self.names = value_names(self.func)
        self._consumers = {}
        for op in block.ops:
            for operand in op.operands:
                users = self._consumers.setdefault(operand, [])
                if op not in users:
                    users.append(op)
        self.live = self._live_ops()

    def _live_ops(self) -> set[Operation]:
        """Ops whose results reach the function's results (the others are dead
        code, which fusion leaves alone)."""
        terminator = self.block.last_op
        stack = [] if terminator is None else self.producers(terminator)
        live: set[Operation] = set(stack)
        while stack:
            for p in self.producers(stack.pop()):
                if p not in live:
                    live.add(p)
                    stack.append(p)
        return live

    @property
    def block(self) -> Block:
        """The function body."""
        return self.func.body.block

    def consumers(self, value: SSAValue) -> list[Operation]:
        """Distinct top-level ops reading `value`, in program order; the
        function's `func.return` counts (the value is then an output)."""
        return self._consumers.get(value, [])

    def nbytes(self, value: SSAValue) -> int:
        """Bytes of a tensor value in memory (memoized: fusion asks often)."""
        found = self._nbytes.get(value)
        if found is None:
            t = value.type
            assert isinstance(t, TensorType)
            found = numel(tuple(t.get_shape())) * _width(self.dtype(value))
            self._nbytes[value] = found
        return found

    def dtype(self, value: SSAValue) -> str:
        """The element type name of a tensor value, `f32`, ... (memoized)."""
        found = self._dtype.get(value)
        if found is None:
            t = value.type
            assert isinstance(t, TensorType)
            found = self._dtype[value] = element_type_name(t.element_type)
        return found

    def position(self, value: SSAValue) -> tuple[int, int]:
        """A stable sort key of a value (arguments first, then results in
        program order): sets of values are iterated in this order so that
        remarks and rewrites do not depend on memory addresses."""
        if isinstance(value, OpResult) and value.op in self.index:
            return (self.index[value.op] + 1, value.index)
        return (0, value.index if isinstance(value, BlockArgument) else 0)

    def is_output(self, value: SSAValue) -> bool:
        """`value` is returned by the function (so it must reach memory)."""
        return any(op.has_trait(IsTerminator) for op in self.consumers(value))

    def producer(self, value: SSAValue) -> Operation | None:
        """The top-level op defining `value`; None for a function argument."""
        if isinstance(value, OpResult) and value.op in self.index:
            return value.op
        return None

    def producers(self, op: Operation) -> list[Operation]:
        """Distinct ops whose results `op` reads, in operand order."""
        found: list[Operation] = []
        for operand in op.operands:
            p = self.producer(operand)
            if p is not None and p not in found:
                found.append(p)
        return found

    def users(self, op: Operation) -> list[Operation]:
        """Distinct non-terminator ops reading any result of `op`."""
        found: list[Operation] = []
        for res in op.results:
            for user in self.consumers(res):
                if user in self.index and user not in found:
                    found.append(user)
        return found

    def describe(self, op: Operation) -> str:
        """`nn.exp (%2)`: how remarks and errors name an op."""
        if op.results:
            return f"{op.name} ({self.names.get(op.results[0], '%?')})"
        return op.name

    def reaches(self, src: Operation, dst: Operation) -> bool:
        """A path `src -> ... -> dst` exists. Every edge goes from a lower to
        a higher index, so the search never leaves the window between them."""
        limit = self.index[dst]
        if self.index[src] >= limit:
            return False
        seen = {src}
        stack = [src]
        while stack:
            for user in self.users(stack.pop()):
                if user is dst:
                    return True
                if user not in seen and self.index[user] < limit:
                    seen.add(user)
                    stack.append(user)
        return False


def is_function_argument(value: SSAValue) -> bool:
    """`value` is an argument of the function being analysed."""
    return isinstance(value, BlockArgument)


# --- the order-keeping graph of groups -------------------------------------------------


@dataclass
class Node:
    """A set of ops that will run as one kernel (one op before any merge)."""

    nid: int
    ops: list[Operation]
    pos: int
    preds: dict[int, int] = field(default_factory=dict[int, int])
    succs: dict[int, int] = field(default_factory=dict[int, int])


class FusionGraph:
    """Groups of ops in a topological order that merges keep valid.

    Merging nodes `x` (earlier) and `y` (later) is legal iff no node strictly
    between them in the order is both reachable from `x` and able to reach
    `y`: such a node would have to run both after and before the merged
    kernel. The check and the reordering only touch the window of the order
    between `x` and `y`, which keeps formation near-linear in practice.
    """

    def __init__(self, dep: DependencyAnalysis) -> None:
        self.dep = dep
        self.nodes: dict[int, Node] = {}
        self.node_of: dict[Operation, int] = {}
        self.order: list[int | None] = []
        for i, op in enumerate(dep.ops):
            self.nodes[i] = Node(i, [op], i)
            self.node_of[op] = i
            self.order.append(i)
        for op in dep.ops:
            for user in dep.users(op):
                self._add_edge(self.node_of[op], self.node_of[user], 1)

    def _add_edge(self, a: int, b: int, count: int) -> None:
        self.nodes[a].succs[b] = self.nodes[a].succs.get(b, 0) + count
        self.nodes[b].preds[a] = self.nodes[b].preds.get(a, 0) + count

    def node(self, op: Operation) -> Node:
        """The node holding `op`."""
        return self.nodes[self.node_of[op]]

    def ordered_nodes(self) -> Iterator[Node]:
        """Every node, in the current topological order."""
        return (self.nodes[n] for n in self.order if n is not None)

    def cycle_witness(self, a: Node, b: Node) -> Operation | None:
        """An op outside `a` and `b` that lies on a path between them (so
        merging them would create a cycle), or None when the merge is safe."""
        x, y = (a, b) if a.pos < b.pos else (b, a)
        _, witness = self._descendants_in_window(x, y)
        return witness

    def _descendants_in_window(self, x: Node, y: Node) -> tuple[list[Node], Operation | None]:
        """Nodes between `x` and `y` reachable from `x`, and the first of them
        found to have an edge into `y` (a cycle witness)."""
        seen: set[int] = set()
        stack = [s for s in x.succs if s != y.nid and self.nodes[s].pos < y.pos]
        found: list[Node] = []
        while stack:
            nid = stack.pop()
            if nid in seen:
                continue
            seen.add(nid)
            n = self.nodes[nid]
            found.append(n)
            if y.nid in n.succs:
                return found, n.ops[0]
            stack.extend(s for s in n.succs if s not in seen and self.nodes[s].pos < y.pos)
        return found, None

    def merge(self, a: Node, b: Node) -> Node:
        """Merge two nodes whose merge is cycle-free; returns the survivor.

        1. order the pair by position and find `x`'s descendants in the window;
        2. move the ops and edges of the smaller node into the larger one;
        3. rewrite the window as: non-descendants, merged node, descendants.
        """
        x, y = (a, b) if a.pos < b.pos else (b, a)
        desc, witness = self._descendants_in_window(x, y)
        assert witness is None, "merge would create a cycle"
        big, small = (a, b) if len(a.ops) >= len(b.ops) else (b, a)
        self._absorb(big, small)
        window = [n for n in self.order[x.pos + 1 : y.pos] if n is not None]
        desc_ids = {n.nid for n in desc}
        rest = [n for n in window if n not in desc_ids]
        sequence = [*rest, big.nid, *(n for n in window if n in desc_ids)]
        start = x.pos
        for k in range(x.pos, y.pos + 1):
            self.order[k] = None
        for k, nid in enumerate(sequence):
            self.order[start + k] = nid
            self.nodes[nid].pos = start + k
        return big

    def _absorb(self, big: Node, small: Node) -> None:
        for op in small.ops:
            self.node_of[op] = big.nid
        big.ops.extend(small.ops)
        for s, count in small.succs.items():
            del self.nodes[s].preds[small.nid]
            if s != big.nid:
                self._add_edge(big.nid, s, count)
        for p, count in small.preds.items():
            del self.nodes[p].succs[small.nid]
            if p != big.nid:
                self._add_edge(p, big.nid, count)
        big.preds.pop(small.nid, None)
        big.succs.pop(small.nid, None)
        del self.nodes[small.nid]


# --- the pass ----------------------------------------------------------------------------


def functions(module: ModuleOp) -> Iterable[FuncOp]:
    """The functions with a body in `module`."""
    return [op for op in module.walk() if isinstance(op, FuncOp) and not op.is_declaration]


def strip_dep_attributes(module: ModuleOp) -> None:
    """Remove the `dep.*` attributes `dependency-analysis` wrote."""
    for op in module.walk():
        for key in [k for k in op.attributes if k.startswith(DEP_ATTR_PREFIX)]:
            del op.attributes[key]
