"""What an op handler sees of one ONNX node: its inputs (emitted values or
constants known at import time), its attributes, and the emitter.

Values known at import time (initializers, `Constant` outputs, folded shape
arithmetic) stay NumPy arrays until an op needs them as operands; only then is
an `nn.constant` emitted, once per ONNX value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper

from fusec.analysis.diagnostics import FusecError
from fusec.importers.onnx.emit import ELEMENT_TYPES, Emitter, Val

Value = Val | np.ndarray
"""A value of the ONNX graph: emitted (`Val`) or known at import time."""


class OnnxImportError(FusecError):
    """An ONNX model fusec cannot import, with a sentence saying why."""


class NeedsConstantError(OnnxImportError):
    """An input that must be known at import time (a shape, axes) is a runtime
    value. `graph_input` names the model input it is, if it is one, so that a
    caller may bind it (`import_model(..., bind={name: array})`)."""

    def __init__(self, message: str, graph_input: str | None) -> None:
        super().__init__(message)
        self.graph_input = graph_input


def printable(text: str, limit: int = 80) -> str:
    """An untrusted name made safe to print: control characters replaced."""
    clean = "".join(c if c.isprintable() else "?" for c in text)
    return clean if len(clean) <= limit else clean[:limit] + "..."


@dataclass
class GraphState:
    """The value table of the graph being imported."""

    em: Emitter
    opset: int
    fold_max_elements: int = 1 << 16
    """Import-time folding makes results of at most this many elements (or no
    bigger than the node's largest input); bigger ones stay ops."""
    values: dict[str, Value] = field(default_factory=dict)
    materialized: dict[str, Val] = field(default_factory=dict)
    graph_inputs: set[str] = field(default_factory=set)


@dataclass
class NodeCtx:
    """One node being imported; handlers read inputs and attributes here."""

    node: onnx.NodeProto
    state: GraphState
    label: str

    @property
    def em(self) -> Emitter:
        """The emitter of the function being built."""
        return self.state.em

    @property
    def opset(self) -> int:
        """The model's default-domain opset version."""
        return self.state.opset

    @property
    def hint(self) -> str:
        """A name hint for emitted values: the node's first output name."""
        return self.node.output[0] if self.node.output else self.node.op_type.lower()

    def fail(self, message: str) -> OnnxImportError:
        """`node 'Conv_3' (Conv): <message>`."""
        return OnnxImportError(f"node {self.label} ({self.node.op_type}): {message}")

    # --- inputs -----------------------------------------------------------------

    @property
    def num_inputs(self) -> int:
        """Input slots of the node, absent optional ones included."""
        return len(self.node.input)

    def has(self, i: int) -> bool:
        """Whether optional input `i` is present (an empty name means absent)."""
        return i < len(self.node.input) and self.node.input[i] != ""

    def value(self, i: int) -> Value:
        """Input `i` as a `Val` or, if known at import time, an array."""
        if not self.has(i):
            raise self.fail(f"input #{i} is required")
        return self.state.values[self.node.input[i]]

    def tensor(self, i: int) -> Val:
        """Input `i` as an emitted value (constants are emitted on first use)."""
        value = self.value(i)
        if isinstance(value, Val):
            return value
        name = self.node.input[i]
        if name not in self.state.materialized:
            self.state.materialized[name] = self.constant(value, name)
        return self.state.materialized[name]

    def const(self, i: int, what: str) -> np.ndarray:
        """Input `i`, which must be known at import time (`what` it is, for the error)."""
        value = self.value(i)
        if isinstance(value, np.ndarray):
            return value
        name = self.node.input[i]
        bindable = name if name in self.state.graph_inputs else None
        raise NeedsConstantError(
            f"node {self.label} ({self.node.op_type}): {what} (input #{i} "
            f"'{printable(name)}') must be a constant known at import time; "
            "dynamic values there are not supported",
            bindable,
        )

    def const_ints(self, i: int, what: str) -> list[int]:
        """A constant integer list input (axes, shape, pads)."""
        return [int(v) for v in self.const(i, what).reshape(-1)]

    def constant(self, array: np.ndarray, hint: str = "cst") -> Val:
        """Emit `array` as an `nn.constant`, refusing element types fusec lacks."""
        array = np.asarray(array)
        if array.dtype.name not in ELEMENT_TYPES:
            raise self.fail(f"constant of element type {array.dtype} is not supported")
        return self.em.constant(array, hint)

    def scalar(self, value: float, like: Val) -> Val:
        """A rank-0 constant of `like`'s element type."""
        return self.constant(np.asarray(value, dtype=like.dtype), "cst")

    # --- attributes ----------------------------------------------------------

    def attr(self, name: str, default: Any = None) -> Any:
        """Attribute `name` as a Python value (bytes decoded), or `default`."""
        for a in self.node.attribute:
            if a.name == name:
                value = helper.get_attribute_value(a)
                return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        return default

    def only_attrs(self, known: Sequence[str]) -> None:
        """Refuse attributes this handler does not understand."""
        for a in self.node.attribute:
            if a.name not in known:
                raise self.fail(f"attribute '{printable(a.name)}' is not supported")

    def expect_dtype(self, x: Val, allowed: frozenset[str], what: str) -> None:
        """Refuse element types the `nn` op cannot take."""
        if x.dtype.name not in allowed:
            raise self.fail(f"element type {x.dtype} is not supported ({what})")


Handler = Callable[[NodeCtx], "Value | list[Value]"]
"""Imports one node; returns its outputs in order."""


def axis_of(ctx: NodeCtx, axis: int, rank: int) -> int:
    """Normalize an axis attribute, or fail naming the node."""
    if not -rank <= axis < max(rank, 1):
        raise ctx.fail(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0
