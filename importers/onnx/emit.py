"""Text emission of `nn` IR: safe SSA names, tensor types, dense constants, ops.

ONNX names are untrusted input (a model may name a value `x" } func.call ...`),
so nothing from the model reaches the text unfiltered: value and function names
are reduced to `[A-Za-z0-9_]`, made unique, and spelled so that xDSL keeps them
as the argument names `fusec run --inputs` keys by.

```mlir
%y = nn.add %x, %c : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
```
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fusec.dialects import shapes
from fusec.dialects.element_types import element
from fusec.dialects.nn_base import FLOAT_TYPES, INT_TYPES, NUMPY_TYPES, format_float

# NumPy dtype name -> MLIR element type; everything else is refused. ONNX
# holds BFLOAT16 tensors as ml_dtypes' `bfloat16` arrays (onnx depends on
# ml_dtypes): their bytes are bf16's bit patterns, printed as hex literals.
_BF16 = element("bf16")  # ml_dtypes names its dtype as torch does: `torch_name`
ELEMENT_TYPES: dict[str, str] = {element(n).host_dtype: n for n in sorted(NUMPY_TYPES)} \
    | {_BF16.torch_name: _BF16.name}
FLOAT_DTYPES = frozenset(element(n).host_dtype for n in NUMPY_TYPES & FLOAT_TYPES) \
    | {_BF16.torch_name}
INT_DTYPES = frozenset(element(n).host_dtype for n in INT_TYPES)


@dataclass(frozen=True)
class Val:
    """An SSA value of the emitted function: its name (without `%`), static
    shape and NumPy element dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def type(self) -> str:
        """The MLIR tensor type, e.g. `tensor<2x3xf32>`."""
        return tensor_type(self.shape, self.dtype)

    @property
    def rank(self) -> int:
        """The number of dimensions."""
        return len(self.shape)


def tensor_type(shape: Sequence[int], dtype: np.dtype) -> str:
    """`tensor<2x3xf32>`; a rank-0 tensor is `tensor<f32>`."""
    dims = "".join(f"{int(d)}x" for d in shape)
    return f"tensor<{dims}{ELEMENT_TYPES[np.dtype(dtype).name]}>"


_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
# xDSL drops a `_<digits>` suffix from a name hint (`%x_1` is read as `x`).
_NUMBERED_SUFFIX = re.compile(r"_\d+$")


def sanitize(name: str, fallback: str = "v") -> str:
    """A safe identifier from an untrusted name: `input.1` -> `input_1_`.

    Only `[A-Za-z0-9_]` survive, the name starts with a letter, and a name
    ending in `_<digits>` gets a trailing `_` so that xDSL keeps it whole.
    """
    # Exporters name values like `/features/features.2/Clip_output_0`.
    text = _UNSAFE.sub("_", name).lstrip("_")[:64]
    if not text or not text[0].isalpha():
        text = fallback + ("_" + text if text else "")
    if _NUMBERED_SUFFIX.search(text):
        text += "_"
    return text


def format_attr(value: object) -> str:
    """An attribute value in the spec's plain spelling."""
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return format_float(float(value))
    if isinstance(value, str):
        # Only the importer's own fixed strings ("tanh", "lt") reach here.
        assert re.fullmatch(r"[a-z_]+", value), value
        return f'"{value}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(format_attr(v) for v in value) + "]"
    raise TypeError(f"cannot print attribute value {value!r}")


def dense_literal(array: np.ndarray) -> str:
    """`dense<...> : tensor<...>` holding `array` exactly: a splat literal when
    all elements are one finite value, otherwise the little-endian hex bytes."""
    array = np.asarray(array)
    flat = array.reshape(-1)
    kind = array.dtype.kind
    # ml_dtypes' bfloat16 has kind 'V': a non-finite bf16 splat is written as bytes too.
    is_float = kind == "f" or array.dtype.name == _BF16.torch_name
    if flat.size and np.all(flat == flat[0]) and (not is_float or np.isfinite(flat[0])):
        first = flat[0]
        if kind == "b":
            body = "true" if first else "false"
        elif kind in "iu":
            body = str(int(first))
        else:
            # str() of a NumPy float is its shortest round-trip repr in its own type.
            body = format_float(float(str(first)))
            if body in ("0.0", "-0.0") and np.signbit(first):
                body = "-0.0"
    else:
        data = array.astype(array.dtype.newbyteorder("<"))
        if kind == "b":
            data = data.astype(np.uint8)
        body = '"0x' + data.tobytes().hex().upper() + '"'
    return f"dense<{body}> : {tensor_type(array.shape, array.dtype)}"


class Emitter:
    """Collects the body of one `func.func`, one op per line."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._taken: set[str] = set()

    def fresh(self, hint: str) -> str:
        """A new unique SSA name derived from `hint` (untrusted)."""
        base = sanitize(hint)
        name, k = base, 1
        while name in self._taken:
            k += 1
            name = f"{base}_u{k}"
        self._taken.add(name)
        return name

    def constant(self, array: np.ndarray, hint: str = "cst") -> Val:
        """Emit `nn.constant` holding `array`."""
        array = np.asarray(array)
        val = Val(self.fresh(hint), tuple(array.shape), array.dtype)
        self.lines.append(f"%{val.name} = nn.constant {dense_literal(array)}")
        return val

    def op(
        self,
        name: str,
        operands: Sequence[Val],
        shape: Sequence[int],
        dtype: np.dtype,
        attrs: dict[str, object] | None = None,
        hint: str = "t",
    ) -> Val:
        """Emit `%r = nn.<name> operands {attrs} : type` and return `%r`."""
        result = Val(self.fresh(hint), tuple(int(d) for d in shape), np.dtype(dtype))
        text = f"%{result.name} = nn.{name}"
        if operands:
            text += " " + ", ".join(f"%{v.name}" for v in operands)
        if attrs:
            text += " {" + ", ".join(f"{k} = {format_attr(v)}" for k, v in attrs.items()) + "}"
        if len(operands) == 1 and operands[0].type == result.type:
            # The spec's short form for ops whose operand and result types agree.
            self.lines.append(f"{text} : {result.type}")
        else:
            in_types = ", ".join(v.type for v in operands)
            self.lines.append(f"{text} : ({in_types}) -> {result.type}")
        return result

    # --- common ops, with the shape arithmetic done here ------------------------

    def binary(self, name: str, a: Val, b: Val, hint: str = "t") -> Val:
        """A broadcasting binary op (`add`, `mul`, ...)."""
        shape = shapes.broadcast_shapes(a.shape, b.shape)
        return self.op(name, [a, b], shape, a.dtype, hint=hint)

    def unary(self, name: str, x: Val, hint: str = "t", **attrs: object) -> Val:
        """An elementwise op whose result type equals its operand type."""
        return self.op(name, [x], x.shape, x.dtype, attrs or None, hint)

    def reshape(self, x: Val, shape: Sequence[int], hint: str = "t") -> Val:
        """`nn.reshape`, or `x` itself when the shape already matches."""
        shape = tuple(int(d) for d in shape)
        return x if shape == x.shape else self.op("reshape", [x], shape, x.dtype, hint=hint)

    def transpose(self, x: Val, perm: Sequence[int], hint: str = "t") -> Val:
        """`nn.transpose`, or `x` itself for the identity permutation."""
        perm = [int(p) for p in perm]
        if perm == list(range(x.rank)):
            return x
        shape = tuple(x.shape[p] for p in perm)
        return self.op("transpose", [x], shape, x.dtype, {"perm": perm}, hint)

    def broadcast_to(self, x: Val, shape: Sequence[int], hint: str = "t") -> Val:
        """`nn.broadcast_to`, or `x` itself when the shape already matches."""
        shape = tuple(int(d) for d in shape)
        return x if shape == x.shape else self.op("broadcast_to", [x], shape, x.dtype, hint=hint)

    def reduce(
        self, name: str, x: Val, axes: Sequence[int], keepdims: bool, hint: str = "t"
    ) -> Val:
        """`nn.reduce_<name>` over normalized `axes`."""
        axes = shapes.normalize_axes(axes, x.rank)
        shape = shapes.reduced_shape(x.shape, axes, keepdims)
        attrs = {"axes": list(axes), "keepdims": keepdims}
        return self.op(f"reduce_{name}", [x], shape, x.dtype, attrs, hint)

    def cast(self, x: Val, dtype: np.dtype, hint: str = "t") -> Val:
        """`nn.cast`, or `x` itself when the element type already matches."""
        if np.dtype(dtype) == x.dtype:
            return x
        return self.op("cast", [x], x.shape, dtype, hint=hint)

    def function(self, name: str, args: Sequence[Val], results: Sequence[Val]) -> str:
        """The whole `func.func` text around the collected body."""
        params = ", ".join(f"%{a.name}: {a.type}" for a in args)
        outs = ", ".join(r.type for r in results)
        ret = ", ".join(f"%{r.name}" for r in results)
        body = "".join(f"  {line}\n" for line in self.lines)
        return (
            f"func.func @{sanitize(name, 'main')}({params}) -> ({outs}) {{\n"
            f"{body}  func.return {ret} : {outs}\n}}\n"
        )
