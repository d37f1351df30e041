"""What an op translator sees of one FX node: its arguments by schema name
(emitted values, constants known at translation time, Python scalars and
lists), the static type of its result, and the emitter.

Values known at translation time (frozen parameters, folded constant
subgraphs such as a causal mask built from `arange`) stay NumPy arrays until
an op needs them as operands; only then is an `nn.constant` emitted, once per
FX node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import fx

from fusec.analysis.diagnostics import FusecError
from fusec.importers.onnx.emit import ELEMENT_TYPES, Emitter, Val

Value = Val | np.ndarray | tuple[Any, ...]
"""A translated FX value: emitted, known at translation time, or a tuple of
those (a multi-output op; `None` where an output is not translated)."""



def _bf16_dtype() -> np.dtype | None:
    """ml_dtypes' `bfloat16`, the NumPy dtype the emitter writes as `bf16`
    (NumPy has none of its own); None when ml_dtypes is not installed."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


BF16 = _bf16_dtype()
"""The dtype of bf16 values in translation (ml_dtypes' `bfloat16`), or None."""

BF16_NEEDS = "bf16 needs the ml_dtypes package (pip install ml_dtypes)"
"""Why bf16 nodes run in PyTorch when ml_dtypes is missing."""

_TORCH_TO_NUMPY: dict[torch.dtype, np.dtype] = {
    torch.float16: np.dtype("float16"),
    torch.float32: np.dtype("float32"),
    torch.float64: np.dtype("float64"),
    torch.int32: np.dtype("int32"),
    torch.int64: np.dtype("int64"),
    torch.bool: np.dtype("bool"),
    **({torch.bfloat16: BF16} if BF16 is not None else {}),
}


class TorchImportError(FusecError):
    """A PyTorch graph (or one of its nodes) fusec cannot translate."""


class Unsupported(TorchImportError):
    """A node has no `nn` translation; the backend runs it in PyTorch instead.
    `node`: its name, where `translate_graph` found it."""

    node: str = ""


def numpy_dtype(dtype: torch.dtype) -> np.dtype | None:
    """The NumPy dtype fusec uses for a torch dtype (ml_dtypes' `bfloat16`
    for bf16), or None (complex, 8-bit floats, ...)."""
    return _TORCH_TO_NUMPY.get(dtype)


def unsupported_dtype(dtype: torch.dtype) -> str:
    """Why values of torch dtype `dtype` are not translated."""
    if dtype == torch.bfloat16:
        return BF16_NEEDS
    return f"element type {dtype} is not supported"


def is_float(dtype: np.dtype) -> bool:
    """A floating-point dtype of translation, bf16 included (ml_dtypes'
    `bfloat16` has NumPy kind 'V', not 'f')."""
    return dtype.kind == "f" or dtype == BF16


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor's values as a NumPy array (detached, on the CPU); a bf16
    tensor's bits as an ml_dtypes `bfloat16` array (exact)."""
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16 and BF16 is not None:
        return t.view(torch.int16).numpy().view(BF16)
    return t.numpy()


def from_numpy(array: np.ndarray) -> torch.Tensor:
    """A CPU tensor of `array`'s values (a bf16 array gives a bfloat16 tensor)."""
    array = np.array(array)  # writable and owned: torch.from_numpy shares memory
    if BF16 is not None and array.dtype == BF16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)


def node_label(node: fx.Node) -> str:
    """`'addmm' (aten.addmm.default)`, with the user's source line when FX kept it."""
    text = f"'{node.name}' ({target_name(node)})"
    where = source_line(node)
    return f"{text} at {where}" if where else text


def target_name(node: fx.Node) -> str:
    """`aten.addmm.default`, `getitem`, or the node's op kind."""
    if node.op != "call_function":
        return node.op
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    return getattr(target, "__name__", str(target))


def source_line(node: fx.Node) -> str | None:
    """`model.py:12` of the innermost user frame FX recorded, if any."""
    trace = node.meta.get("stack_trace")
    if not isinstance(trace, str):
        return None
    frames = [line.strip() for line in trace.splitlines() if line.strip().startswith("File ")]
    if not frames:
        return None
    # `File "/path/model.py", line 12, in forward`
    parts = frames[-1].split('"')
    if len(parts) < 3:
        return None
    line = parts[2].split(",")[1].strip().removeprefix("line ") if "," in parts[2] else "?"
    return f"{parts[1].rsplit('/', 1)[-1]}:{line}"


@dataclass
class GraphState:
    """The value table of the graph being translated."""

    em: Emitter
    values: dict[fx.Node, Value] = field(default_factory=dict)
    materialized: dict[fx.Node, Val] = field(default_factory=dict)
    fold_max_elements: int = 1 << 16
    """Constant subgraphs are computed at translation time when the result
    holds at most this many elements; bigger ones stay ops."""


@dataclass
class OpCtx:
    """One node being translated; translators read their arguments here."""

    node: fx.Node
    state: GraphState

    @property
    def em(self) -> Emitter:
        """The emitter of the function being built."""
        return self.state.em

    @property
    def hint(self) -> str:
        """A name hint for emitted values: the FX node's name."""
        return self.node.name

    def fail(self, message: str) -> Unsupported:
        """An `Unsupported` error naming the node."""
        return Unsupported(f"node {node_label(self.node)}: {message}")

    # --- arguments --------------------------------------------------------------

    def arg(self, name: str) -> Any:
        """The raw argument `name` of the op's schema (a Node, scalar, list,
        or the schema default)."""
        return schema_args(self.node)[name]

    def tensor(self, name: str) -> Val:
        """Tensor argument `name` as an emitted value (constants emitted on first use)."""
        return self.as_val(self.arg(name))

    def as_val(self, arg: Any) -> Val:
        """An FX argument (a Node) as an emitted value."""
        if not isinstance(arg, fx.Node):
            raise self.fail(f"expected a tensor operand, got {type(arg).__name__}")
        value = self.state.values[arg]
        if isinstance(value, Val):
            return value
        if isinstance(value, tuple):
            raise self.fail(f"operand '{arg.name}' is a tuple")
        if arg not in self.state.materialized:
            self.state.materialized[arg] = self.constant(value, arg.name)
        return self.state.materialized[arg]

    def known(self, arg: Any) -> np.ndarray | None:
        """The value of a Node known at translation time, else None."""
        if isinstance(arg, fx.Node):
            value = self.state.values.get(arg)
            return value if isinstance(value, np.ndarray) else None
        return None

    def constant(self, array: np.ndarray, hint: str = "cst") -> Val:
        """Emit `array` as an `nn.constant`, refusing element types fusec lacks."""
        array = np.asarray(array)
        if array.dtype.name not in ELEMENT_TYPES:
            raise self.fail(f"constant of element type {array.dtype} is not supported")
        return self.em.constant(array, hint)

    def scalar(self, value: float | bool, dtype: np.dtype) -> Val:
        """A rank-0 constant of `dtype`."""
        return self.constant(np.asarray(value, dtype=dtype), "cst")

    # --- the result -----------------------------------------------------------

    @property
    def out(self) -> torch.Tensor:
        """The node's (first) result as PyTorch traced it (a fake tensor)."""
        val = self.node.meta["val"]
        return val[0] if isinstance(val, list | tuple) else val

    @property
    def out_shape(self) -> tuple[int, ...]:
        """The static shape of the (first) result."""
        return tuple(int(d) for d in self.out.shape)

    @property
    def out_dtype(self) -> np.dtype:
        """The NumPy dtype of the (first) result."""
        dtype = numpy_dtype(self.out.dtype)
        if dtype is None:
            raise self.fail(unsupported_dtype(self.out.dtype))
        return dtype


Translator = Callable[[OpCtx], Value]
"""Translates one node; returns its value (a tuple for multi-output ops)."""


def schema_args(node: fx.Node) -> dict[str, Any]:
    """The node's arguments by schema name, defaults filled in."""
    target = node.target
    assert isinstance(target, torch._ops.OpOverload), target
    named: dict[str, Any] = {}
    for i, a in enumerate(target._schema.arguments):
        if i < len(node.args):
            named[a.name] = node.args[i]
        elif a.name in node.kwargs:
            named[a.name] = node.kwargs[a.name]
        else:
            named[a.name] = a.default_value if a.has_default_value() else None
    return named
