"""Walk an FX graph of core ATen ops and emit one `nn` function.

Each node either folds (all its tensor inputs known at translation time:
frozen parameters, `arange`/`full` chains such as a causal mask) by running
it in PyTorch on the CPU, or goes to its translator in `op_table`. Every
translated node is preceded by a comment naming it (and the user's source
line when FX recorded one), so the `.mlir` reads back to the model:

```mlir
  // addmm: aten.addmm.default (model.py:12)
  %addmm = nn.matmul %view, %permute : (tensor<6x8xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
```
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import fx
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.utils._pytree import tree_map

from fusec.importers.onnx.emit import ELEMENT_TYPES, Emitter, Val
from fusec.importers.torch.context import (
    GraphState,
    OpCtx,
    TorchImportError,
    Unsupported,
    Value,
    from_numpy,
    node_label,
    numpy_dtype,
    source_line,
    target_name,
    to_numpy,
    unsupported_dtype,
)
from fusec.importers.torch.op_table import MULTI_OUTPUT_USED, TRANSLATORS


@dataclass(frozen=True)
class Translation:
    """One translated graph: the function's text and its signature."""

    text: str
    args: list[Val]
    """The function's arguments, in placeholder order (constants excluded)."""
    results: list[Val]


def placeholder_val(em: Emitter, node: fx.Node) -> Val:
    """A function argument for a placeholder, typed from its traced value."""
    meta = node.meta.get("val")
    if not isinstance(meta, torch.Tensor):
        raise TorchImportError(f"input '{node.name}' is not a tensor "
                               f"({type(meta).__name__}); only tensor inputs are supported")
    dtype = numpy_dtype(meta.dtype)
    if dtype is None:
        raise TorchImportError(f"input '{node.name}': {unsupported_dtype(meta.dtype)}")
    try:
        shape = tuple(int(d) for d in meta.shape)
    except (TypeError, RuntimeError):
        raise TorchImportError(f"dynamic shapes are not supported: input '{node.name}' has "
                               f"shape {list(meta.shape)}") from None
    return Val(em.fresh(node.name), shape, dtype)


def translate_graph(
    gm: fx.GraphModule,
    name: str,
    constants: Mapping[fx.Node, np.ndarray] | None = None,
    header: str = "",
    fold_max_elements: int = 1 << 16,
    trailing: frozenset[fx.Node] = frozenset(),
) -> Translation:
    """Translate every node of `gm` into one `func.func @name`; placeholders
    in `constants` are known values, the others become arguments (those in
    `trailing` after the rest). Raises `Unsupported` naming the first node
    without a translation."""
    state = GraphState(Emitter(), fold_max_elements=fold_max_elements)
    args: list[Val] = []
    late: list[Val] = []
    results: list[Val] = []
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            if constants is not None and node in constants:
                state.values[node] = np.asarray(constants[node])
            else:
                val = placeholder_val(state.em, node)
                state.values[node] = val
                (late if node in trailing else args).append(val)
        elif node.op == "output":
            results = [_result(state, out) for out in _flat_outputs(node)]
        else:
            try:
                state.values[node] = _translate_or_explain(node, state, gm)
            except Unsupported as err:
                err.node = err.node or node.name
                raise
    args += late
    return Translation(header + state.em.function(name, args, results), args, results)


def _translate_or_explain(node: fx.Node, state: GraphState, gm: fx.GraphModule) -> Value:
    """`translate_node`, with a translator's Python error turned into one naming the node."""
    try:
        return translate_node(node, state, gm)
    except (KeyError, ValueError, TypeError, IndexError, AssertionError) as err:
        raise Unsupported(f"node {node_label(node)}: cannot translate it "
                          f"({type(err).__name__}: {err})") from None


def translate_node(node: fx.Node, state: GraphState, gm: fx.GraphModule | None = None) -> Value:
    """The value of one `get_attr` or `call_function` node (emitting its ops)."""
    if node.op == "get_attr":
        if gm is None:
            raise Unsupported(f"node {node_label(node)}: attributes are not supported here")
        return _attribute(gm, node)
    if node.op != "call_function":
        raise Unsupported(f"node {node_label(node)}: {node.op} nodes are not supported")
    if node.target is operator.getitem:
        return _getitem(node, state)
    folded = _try_fold(node, state)
    if folded is not None:
        return folded
    translator = TRANSLATORS.get(node.target)
    if translator is None:
        raise Unsupported(f"node {node_label(node)}: fusec has no translation for "
                          f"{target_name(node)}")
    _check_used_outputs(node)
    where = source_line(node)
    state.em.lines.append(f"// {node.name}: {target_name(node)}" + (f" ({where})" if where
                                                                      else ""))
    return translator(OpCtx(node, state))


def node_at(text: str, line: int) -> str | None:
    """The FX node whose ops line `line` (1-based) of a translation's `text`
    is among: the last `// NAME: target` comment `translate_node` wrote at or
    above it; None above the first."""
    for row in reversed(text.split("\n")[:line]):
        found = _NODE_COMMENT.match(row)
        if found:
            return found.group(1)
    return None


_NODE_COMMENT = re.compile(r"\s*// ([A-Za-z_][A-Za-z0-9_]*): ")


def _getitem(node: fx.Node, state: GraphState) -> Value:
    source, index = node.args
    value = state.values[source]  # type: ignore[index]
    if not isinstance(value, tuple) or value[index] is None:  # type: ignore[index]
        raise Unsupported(f"node {node_label(node)}: output #{index} of "
                          f"'{source}' is not translated")  # type: ignore[str-bytes-safe]
    return value[index]  # type: ignore[index,no-any-return]


def _check_used_outputs(node: fx.Node) -> None:
    """A multi-output op whose untranslated outputs are used stays in PyTorch."""
    used = MULTI_OUTPUT_USED.get(node.target)
    if used is None:
        return
    for user in node.users:
        if user.target is not operator.getitem or user.args[1] not in used:
            raise Unsupported(f"node {node_label(node)}: only output(s) "
                              f"{sorted(used)} are translated, and '{user.name}' uses another")


def _try_fold(node: fx.Node, state: GraphState) -> Value | None:
    """Run a node whose tensor inputs are all known, in PyTorch on the CPU;
    None when it cannot or should not be folded."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return None
    if torch.Tag.nondeterministic_seeded in target.tags:
        return None
    inputs = node.all_input_nodes
    if not all(isinstance(state.values.get(n), np.ndarray) for n in inputs):
        return None
    meta = node.meta.get("val")
    pieces = meta if isinstance(meta, list | tuple) else [meta]
    if not all(isinstance(p, torch.Tensor) for p in pieces):
        return None
    size = max(p.numel() for p in pieces)
    largest = max((state.values[n].size for n in inputs), default=0)  # type: ignore[union-attr]
    if size > state.fold_max_elements and size > largest:
        return None
    return _run_on_cpu(node, target, state)


def _run_on_cpu(node: fx.Node, target: Callable[..., object], state: GraphState) -> Value | None:
    def concrete(a: object) -> object:
        if isinstance(a, fx.Node):
            return from_numpy(state.values[a])  # type: ignore[arg-type]
        if isinstance(a, torch.device):
            return torch.device("cpu")
        return a

    kwargs = {k: concrete(v) for k, v in node.kwargs.items()}
    if "device" in kwargs:
        kwargs["device"] = torch.device("cpu")
    kwargs.pop("pin_memory", None)
    # A compiler runs inside the tracer's fake-tensor mode; folding needs real values.
    with unset_fake_temporarily():
        result = target(*tree_map(concrete, node.args), **kwargs)
        pieces = result if isinstance(result, list | tuple) else [result]
        if not all(isinstance(p, torch.Tensor) and numpy_dtype(p.dtype) is not None
                   for p in pieces):
            return None
        arrays = [to_numpy(p) for p in pieces]  # type: ignore[arg-type]
    return tuple(arrays) if isinstance(result, list | tuple) else arrays[0]


def _attribute(gm: fx.GraphModule, node: fx.Node) -> np.ndarray:
    value: object = gm
    for part in str(node.target).split("."):
        value = getattr(value, part)
    if not isinstance(value, torch.Tensor):
        raise Unsupported(f"node {node_label(node)}: attribute of type "
                          f"{type(value).__name__} is not supported")
    if numpy_dtype(value.dtype) is None:
        raise Unsupported(f"node {node_label(node)}: attribute: "
                          f"{unsupported_dtype(value.dtype)}")
    # A compiler runs inside the tracer's fake-tensor mode, which refuses to
    # read a real tensor constant (`x * torch.tensor(2.0)`).
    with unset_fake_temporarily():
        return to_numpy(value)


def _flat_outputs(node: fx.Node) -> list[fx.Node]:
    outs = node.args[0]
    flat = list(outs) if isinstance(outs, list | tuple) else [outs]
    for out in flat:
        if not isinstance(out, fx.Node):
            raise TorchImportError(f"graph output {out!r} is not a tensor; only tensor "
                                   "outputs are supported")
    return flat  # type: ignore[return-value]


def _result(state: GraphState, node: fx.Node) -> Val:
    value = state.values[node]
    if isinstance(value, Val):
        return value
    if isinstance(value, tuple):
        raise TorchImportError(f"graph output '{node.name}' is a tuple")
    if node not in state.materialized:
        if value.dtype.name not in ELEMENT_TYPES:
            raise TorchImportError(f"graph output '{node.name}' has element type "
                                   f"{value.dtype}, which fusec does not support")
        state.materialized[node] = state.em.constant(value, node.name)
    return state.materialized[node]
