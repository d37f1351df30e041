"""Walk an ONNX graph and emit one `nn` function, then parse and verify it.

Each node either folds (all its inputs known at import time: initializers,
constants, shapes of static tensors) or goes to the handler of its op type,
which emits `nn` ops. The text is parsed and verified by fusec itself, so a
successful import is always a valid `nn` program.

```python
result = import_model("mlp.onnx")
print(result.text)            # func.func @main(%x: tensor<2x8xf32>) -> ...
result.inputs                 # {'x': 'x'}: ONNX input name -> argument name
```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import helper
from xdsl.dialects.builtin import ModuleOp

from fusec.importers.checked_parse import parse_imported
from fusec.importers.onnx import (
    fold_fallback,
    ops_elementwise,
    ops_nn,
    ops_shape,
    ops_window,
)
from fusec.importers.onnx.context import (
    GraphState,
    Handler,
    NodeCtx,
    OnnxImportError,
    Value,
    printable,
)
from fusec.importers.onnx.emit import ELEMENT_TYPES, FLOAT_DTYPES, Emitter, Val
from fusec.importers.onnx.loader import infer_shapes, load_model, tensor_to_array

HANDLERS: dict[str, Handler] = {
    **ops_elementwise.HANDLERS,
    **ops_nn.HANDLERS,
    **ops_shape.HANDLERS,
    **ops_window.HANDLERS,
}
"""Every supported ONNX op type (default domain) -> its handler."""

# Ops whose result is not a function of their inputs: never folded.
_NOT_FOLDABLE = frozenset({
    "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
    "Multinomial", "Bernoulli", "If", "Loop", "Scan",
})
_DEFAULT_DOMAINS = ("", "ai.onnx")


@dataclass(frozen=True)
class ImportResult:
    """An imported model: its `nn` text, the parsed and verified module, and
    how ONNX input names map to the function's argument names."""

    text: str
    module: ModuleOp
    inputs: dict[str, str]
    outputs: list[str]
    params: dict[str, np.ndarray] = field(default_factory=dict[str, np.ndarray])
    """Weights that became arguments (`params_above`), keyed by argument name."""


def import_model(
    model: onnx.ModelProto | str | Path,
    bind: Mapping[str, np.ndarray] | None = None,
    filename: str = "model.mlir",
    params_above: int | None = None,
    fold_max_elements: int = 1 << 16,
) -> ImportResult:
    """Import an ONNX model (a path or a loaded `ModelProto`) into `nn`.

    `bind` fixes graph inputs to values known at import time (they stop being
    arguments); use it for inputs that determine shapes. Weights become
    `nn.constant`s, except floating-point initializers of at least
    `params_above` bytes, which become trailing function arguments returned in
    `ImportResult.params`. A node whose inputs are all known is computed at
    import time when its result holds at most `fold_max_elements` elements or
    no more than its largest input; a bigger one stays an op. Raises
    `OnnxImportError` naming the node for anything unsupported.
    """
    if not isinstance(model, onnx.ModelProto):
        model = load_model(model)
    elif not any(model.graph.value_info):
        model = infer_shapes(model)
    graph = model.graph
    state = GraphState(Emitter(), _default_opset(model), fold_max_elements)
    for init in graph.initializer:
        state.values[init.name] = tensor_to_array(init)
    args, names = _arguments(graph, state, dict(bind or {}))
    params = _weight_arguments(graph, state, args, params_above)
    inferred = {vi.name: vi for vi in [*graph.value_info, *graph.output]}
    for index, node in enumerate(graph.node):
        _import_node(node, index, state, inferred)
    results = [_graph_output(state, out.name) for out in graph.output]
    text = _header(model, names) + state.em.function(graph.name or "main", args, results)
    outputs = [o.name for o in graph.output]
    module = parse_imported(text, filename, OnnxImportError)
    return ImportResult(text, module, names, outputs, params)


def _default_opset(model: onnx.ModelProto) -> int:
    for entry in model.opset_import:
        if entry.domain in _DEFAULT_DOMAINS:
            return int(entry.version)
    raise OnnxImportError("the model imports no version of the default ONNX opset")


def _arguments(
    graph: onnx.GraphProto, state: GraphState, bind: dict[str, np.ndarray]
) -> tuple[list[Val], dict[str, str]]:
    """Function arguments for the graph inputs that are not initializers."""
    args: list[Val] = []
    names: dict[str, str] = {}
    for vi in graph.input:
        if vi.name in state.values:
            continue  # an initializer listed as an input (IR version < 4)
        shape, dtype = _static_type(vi)
        if vi.name in bind:
            state.values[vi.name] = np.asarray(bind.pop(vi.name)).astype(dtype).reshape(shape)
            continue
        val = Val(state.em.fresh(vi.name), shape, dtype)
        state.values[vi.name] = val
        state.graph_inputs.add(vi.name)
        names[vi.name] = val.name
        args.append(val)
    if bind:
        raise OnnxImportError("cannot bind unknown input(s): "
                              + ", ".join(printable(k) for k in bind))
    return args, names


def _weight_arguments(
    graph: onnx.GraphProto, state: GraphState, args: list[Val], threshold: int | None
) -> dict[str, np.ndarray]:
    """Large float initializers as arguments: the `.mlir` stays small and the
    weights travel in a params file keyed by argument name."""
    if threshold is None:
        return {}
    params: dict[str, np.ndarray] = {}
    for init in graph.initializer:
        value = state.values[init.name]
        assert isinstance(value, np.ndarray)
        if value.dtype.name not in FLOAT_DTYPES or value.nbytes < threshold:
            continue
        val = Val(state.em.fresh(init.name), tuple(value.shape), value.dtype)
        state.values[init.name] = val
        params[val.name] = value
        args.append(val)
    return params


def _static_type(vi: onnx.ValueInfoProto) -> tuple[tuple[int, ...], np.dtype]:
    what = f"input '{printable(vi.name)}'"
    if not vi.type.HasField("tensor_type"):
        raise OnnxImportError(f"{what} is not a tensor (sequences, maps and optionals are "
                              "not supported)")
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        raise OnnxImportError(f"dynamic shapes are not supported: {what} has no shape")
    dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
    if any(d is None for d in dims):
        text = "x".join("?" if d is None else str(d) for d in dims)
        raise OnnxImportError(f"dynamic shapes are not supported: {what} has shape {text}")
    dtype = _numpy_dtype(tt.elem_type)
    if dtype is None or dtype.name not in ELEMENT_TYPES:
        name = helper.tensor_dtype_to_string(tt.elem_type).removeprefix("TensorProto.")
        raise OnnxImportError(f"{what} has element type {name}, which fusec does not support")
    return tuple(int(d) for d in dims if d is not None), dtype


def _numpy_dtype(elem_type: int) -> np.dtype | None:
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return None


def _import_node(
    node: onnx.NodeProto, index: int, state: GraphState, inferred: dict[str, onnx.ValueInfoProto]
) -> None:
    label = f"'{printable(node.name)}'" if node.name else f"#{index}"
    ctx = NodeCtx(node, state, label)
    if node.domain not in _DEFAULT_DOMAINS:
        raise ctx.fail(f"ops of domain '{printable(node.domain)}' are not supported")
    present = [name for name in node.input if name]
    known = all(isinstance(state.values.get(n), np.ndarray) for n in present)
    for name in present:
        if name not in state.values:
            raise ctx.fail(f"input '{printable(name)}' is not defined before this node")
    big = present and known and _too_big_to_fold(ctx, inferred)
    folded = None
    if present and known and node.op_type not in _NOT_FOLDABLE and not big:
        folded = _fold(ctx)
    if folded is not None:
        outputs: list[Value] = list(folded)
    elif node.op_type in HANDLERS:
        produced = HANDLERS[node.op_type](ctx)
        outputs = produced if isinstance(produced, list) else [produced]
    elif big:
        raise ctx.fail(f"op type {printable(node.op_type)} is not supported, and its result "
                       f"is too big to compute at import time (over fold_max_elements = "
                       f"{state.fold_max_elements} elements)")
    else:
        raise ctx.fail(f"op type {printable(node.op_type)} is not supported")
    for position, (name, value) in enumerate(zip(node.output, outputs, strict=False)):
        if name:
            _cross_check(ctx, position, value, inferred.get(name))
            state.values[name] = value
    missing = [n for n in node.output[len(outputs):] if n]
    if missing:
        raise ctx.fail(f"output '{printable(missing[0])}' is not supported")


def _too_big_to_fold(ctx: NodeCtx, inferred: dict[str, onnx.ValueInfoProto]) -> bool:
    """Whether the node's result, as far as it is known before computing it,
    holds more than `fold_max_elements` elements and more than its largest
    input (so that folding never makes a constant much bigger than the model's
    own; 100000x100000 zeros must not be allocated at import time)."""
    sizes = [_inferred_size(inferred.get(name)) for name in ctx.node.output if name]
    if ctx.node.op_type == "ConstantOfShape":
        sizes.append(int(np.prod(np.asarray(ctx.state.values[ctx.node.input[0]]),
                                 dtype=np.float64)))
    result = max((n for n in sizes if n is not None), default=0)
    largest = max(np.asarray(ctx.state.values[n]).size for n in ctx.node.input if n)
    return result > ctx.state.fold_max_elements and result > largest


def _inferred_size(info: onnx.ValueInfoProto | None) -> int | None:
    """Elements of a static shape ONNX inferred, if any."""
    if info is None or not info.type.HasField("tensor_type"):
        return None
    shape = info.type.tensor_type.shape
    if not info.type.tensor_type.HasField("shape") or not all(
            d.HasField("dim_value") for d in shape.dim):
        return None
    return int(np.prod([d.dim_value for d in shape.dim], dtype=np.float64))


def _fold(ctx: NodeCtx) -> list[np.ndarray] | None:
    """Run a node whose inputs are all known, with ONNX's reference evaluator;
    where that fails, with fusec's own evaluation of the op
    (`fold_fallback.py`), or None: the node's handler emits it, and fusec's
    `fold-constants` pass computes it at compile time."""
    from onnx.reference import ReferenceEvaluator

    feeds = {n: ctx.state.values[n] for n in ctx.node.input if n}
    try:
        evaluator = ReferenceEvaluator(ctx.node, opsets={"": ctx.opset})
        results = evaluator.run(None, feeds)
    except Exception as err:  # the evaluator raises whatever its op raises
        if ctx.node.op_type in fold_fallback.FOLDERS:
            return fold_fallback.FOLDERS[ctx.node.op_type](ctx)
        if ctx.node.op_type in HANDLERS:
            return None
        raise ctx.fail(f"cannot evaluate at import time: {printable(str(err), 200)}") from None
    return [np.asarray(r) for r in results]


def _cross_check(
    ctx: NodeCtx, position: int, value: Value, info: onnx.ValueInfoProto | None
) -> None:
    """The importer's shape must agree with ONNX's inferred static shape."""
    if info is None or not info.type.HasField("tensor_type"):
        return
    tt = info.type.tensor_type
    if not tt.HasField("shape"):
        return
    dims = tt.shape.dim
    if not all(d.HasField("dim_value") for d in dims):
        return
    expected = tuple(int(d.dim_value) for d in dims)
    if tuple(value.shape) != expected:
        raise ctx.fail(f"output #{position} has shape {list(value.shape)} here but ONNX "
                       f"infers {list(expected)}")


def _graph_output(state: GraphState, name: str) -> Val:
    value = state.values.get(name)
    if value is None:
        raise OnnxImportError(f"graph output '{printable(name)}' is never computed")
    if isinstance(value, Val):
        return value
    if name not in state.materialized:
        if value.dtype.name not in ELEMENT_TYPES:
            raise OnnxImportError(f"graph output '{printable(name)}' has element type "
                                  f"{value.dtype}, which fusec does not support")
        state.materialized[name] = state.em.constant(value, name)
    return state.materialized[name]


def _header(model: onnx.ModelProto, names: dict[str, str]) -> str:
    lines = [f"// Imported from ONNX (opset {_default_opset(model)}) by `fusec import`."]
    lines += [f"// input '{printable(k)}' -> %{v}" for k, v in names.items()]
    return "\n".join(lines) + "\n"
