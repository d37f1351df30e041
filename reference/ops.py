"""The meaning of each `nn` op in NumPy: one small function per op.

`OP_FUNCTIONS` maps an op class to `fn(op, *operand_arrays) -> array`. The
functions read attributes through the ops' accessors and return an array of
the result's shape; the interpreter (`reference.py`) then casts it to the
result's element type (floats to the compute dtype), so integer reductions
and mixed-type intermediates need no care here.

```mlir
%y = nn.softmax %x {axis = -1} : tensor<4x8xf32>   // _softmax(op, x)
```
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from xdsl.ir import Operation

from fusec.dialects import nn
from fusec.dialects.element_types import round_to_bf16
from fusec.dialects.nn_base import (
    FLOAT_TYPES,
    dense_to_numpy,
    element_type,
    element_type_name,
    numpy_dtype,
)
from fusec.dialects.nn_structured import TO_FIRST, TO_LAST
from fusec.dialects.shapes import window_out

OpFunction = Callable[..., np.ndarray]

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_TANH_COEFF = 0.044715

# --- elementwise, one operand ---------------------------------------------------

# Python's math.erf is correctly rounded in float64; NumPy has no erf and scipy
# is not a dependency, so it is applied element by element.
_erf_scalar = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    """The Gauss error function, elementwise, in the dtype of `x`."""
    x = np.asarray(x)
    return np.asarray(_erf_scalar(x.astype(np.float64)), dtype=np.float64).astype(x.dtype)


def sigmoid(x: np.ndarray) -> np.ndarray:
    """`1 / (1 + exp(-x))` without overflow: exp only sees `-|x|`."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _unary(fn: Callable[[np.ndarray], np.ndarray]) -> OpFunction:
    """An op function for an elementwise op without attributes."""

    def run(op: Operation, x: np.ndarray) -> np.ndarray:
        return fn(x)

    run.__name__ = f"_{getattr(fn, '__name__', 'unary')}"
    return run


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return 1 / np.sqrt(x)


def _reciprocal(x: np.ndarray) -> np.ndarray:
    return 1 / x


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, np.zeros((), x.dtype))


def _silu(x: np.ndarray) -> np.ndarray:
    return x * sigmoid(x)


def _gelu(op: nn.GeluOp, x: np.ndarray) -> np.ndarray:
    if op.approximate == "tanh":
        inner = _SQRT_2_OVER_PI * (x + _GELU_TANH_COEFF * x**3)
        return 0.5 * x * (1 + np.tanh(inner))
    return 0.5 * x * (1 + erf(x / math.sqrt(2.0)))


def _clamp(op: nn.ClampOp, x: np.ndarray) -> np.ndarray:
    # Either bound may be absent (unbounded on that side).
    lo, hi = op.min, op.max
    if lo is not None:
        x = np.maximum(x, lo)
    if hi is not None:
        x = np.minimum(x, hi)
    return x


# --- elementwise, broadcasting -----------------------------------------------------


def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> OpFunction:
    """An op function for a broadcasting binary op without attributes."""

    def run(op: Operation, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return fn(a, b)

    run.__name__ = f"_{getattr(fn, '__name__', 'binary')}"
    return run


_PREDICATES: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "eq": np.equal,
    "ne": np.not_equal,
}


def _cmp(op: nn.CmpOp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _PREDICATES[op.predicate](a, b)


def _select(op: nn.SelectOp, cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(cond, a, b)


def _cast(op: nn.CastOp, x: np.ndarray) -> np.ndarray:
    target = element_type_name(element_type(op.result))
    if target == "i1":
        return x != 0
    if target == "bf16":
        return round_to_bf16(x)
    if target in FLOAT_TYPES:
        # Round through the target type: a cast to a narrower float is an
        # explicit precision loss the program asks for, and the oracle keeps it.
        return x.astype(numpy_dtype(element_type(op.result)))
    if x.dtype.kind == "f":
        # Float to integer truncates toward zero (C, MLIR fptosi).
        return np.trunc(x).astype(numpy_dtype(element_type(op.result)))
    return x.astype(numpy_dtype(element_type(op.result)))


def _constant(op: nn.ConstantOp) -> np.ndarray:
    return dense_to_numpy(op.value)


# --- reductions -------------------------------------------------------------------


def _reduction(fn: Callable[..., Any]) -> OpFunction:
    """An op function for a reduction over `op.axes` with `op.keepdims`."""

    def run(op: nn.ReduceOp, x: np.ndarray) -> np.ndarray:
        if x.size == 0:
            # An empty result needs no element (NumPy's max refuses even
            # that); a non-empty max of nothing is a verifier error.
            shape = np.sum(x, axis=tuple(op.axes), keepdims=op.keepdims).shape
            if math.prod(shape) == 0:
                return np.empty(shape, x.dtype)
        return np.asarray(fn(x, axis=op.axes, keepdims=op.keepdims))

    run.__name__ = f"_reduce_{fn.__name__}"
    return run


# --- composites ----------------------------------------------------------------------


def mean(x: np.ndarray, axis: int | tuple[int, ...], keepdims: bool = False) -> np.ndarray:
    """`np.mean` without its warning: the mean of no elements is 0 / 0 = NaN."""
    axes = (axis,) if isinstance(axis, int) else axis
    count = int(np.prod([x.shape[a] for a in axes]))
    with np.errstate(invalid="ignore"):
        return np.sum(x, axis=axis, keepdims=keepdims) / np.asarray(count, x.dtype)


def _shifted(x: np.ndarray, axis: int) -> np.ndarray:
    """`x - max(x)` along `axis`, so that exp never overflows (an empty axis
    has no maximum, and nothing to shift)."""
    if x.shape[axis] == 0:
        return x
    return x - np.max(x, axis=axis, keepdims=True)


def _softmax(op: nn.SoftmaxOp, x: np.ndarray) -> np.ndarray:
    e = np.exp(_shifted(x, op.axis))
    return e / np.sum(e, axis=op.axis, keepdims=True)


def _log_softmax(op: nn.LogSoftmaxOp, x: np.ndarray) -> np.ndarray:
    s = _shifted(x, op.axis)
    return s - np.log(np.sum(np.exp(s), axis=op.axis, keepdims=True))


def _trailing_axes(op: nn.LayerNormOp | nn.RmsNormOp, x: np.ndarray) -> tuple[int, ...]:
    return tuple(range(op.axis, x.ndim))


def _layer_norm(
    op: nn.LayerNormOp, x: np.ndarray, scale: np.ndarray, bias: np.ndarray
) -> np.ndarray:
    axes = _trailing_axes(op, x)
    centered = x - mean(x, axis=axes, keepdims=True)
    var = mean(centered * centered, axis=axes, keepdims=True)
    return centered / np.sqrt(var + op.epsilon) * scale + bias


def _rms_norm(op: nn.RmsNormOp, x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    mean_sq = mean(x * x, axis=_trailing_axes(op, x), keepdims=True)
    return x / np.sqrt(mean_sq + op.epsilon) * scale


def _batch_norm(
    op: nn.BatchNormOp,
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
) -> np.ndarray:
    # Parameters of shape (C,) broadcast over N and the spatial dimensions.
    per_channel = (-1,) + (1,) * (x.ndim - 2)
    s, b, m, v = (p.reshape(per_channel) for p in (scale, bias, mean, var))
    return (x - m) / np.sqrt(v + op.epsilon) * s + b


# --- contractions and windows ----------------------------------------------------------


def _matmul(op: nn.MatmulOp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(a, b)


def _window(start: int, count: int, stride: int) -> slice:
    """The input positions one kernel tap reads for all `count` outputs."""
    return slice(start, start + (count - 1) * stride + 1, stride)


def _pad_hw(x: np.ndarray, pads: list[int], value: float) -> np.ndarray:
    top, left, bottom, right = pads
    return np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=value)


def _conv2d(op: nn.Conv2dOp, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Sum over kernel taps of a channel contraction: KH*KW einsums instead of
    a loop over every output element (channels last: the same on the
    channels-first views)."""
    if op.channels_last:
        first = _conv2d_nchw(op, x.transpose(TO_FIRST), w.transpose(TO_FIRST))
        return np.ascontiguousarray(first.transpose(TO_LAST))
    return _conv2d_nchw(op, x, w)


def _conv2d_nchw(op: nn.Conv2dOp, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    g = op.groups
    (sh, sw), (dh, dw), pads = op.strides, op.dilations, op.pads
    oh = window_out(h, kh, sh, pads[0] + pads[2], dh)
    ow = window_out(wd, kw, sw, pads[1] + pads[3], dw)
    xp = _pad_hw(x, pads, 0.0).reshape(n, g, cg, h + pads[0] + pads[2], wd + pads[1] + pads[3])
    wg = w.reshape(g, o // g, cg, kh, kw)
    out = np.zeros((n, g, o // g, oh, ow), dtype=np.result_type(x, w))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, :, _window(i * dh, oh, sh), _window(j * dw, ow, sw)]
            out += np.einsum("ngchw,goc->ngohw", patch, wg[:, :, :, i, j])
    return out.reshape(n, o, oh, ow)


def _pool_taps(
    op: nn.MaxPool2dOp | nn.AvgPool2dOp, xp: np.ndarray, out_hw: tuple[int, int]
) -> list[np.ndarray]:
    """The padded input seen by each kernel tap, one array of the output shape each."""
    (kh, kw), (sh, sw) = op.kernel, op.strides
    oh, ow = out_hw
    return [
        xp[:, :, _window(i, oh, sh), _window(j, ow, sw)] for i in range(kh) for j in range(kw)
    ]


def _pool_out_hw(op: nn.MaxPool2dOp | nn.AvgPool2dOp, x: np.ndarray) -> tuple[int, int]:
    (kh, kw), (sh, sw), pads = op.kernel, op.strides, op.pads
    return (
        window_out(x.shape[2], kh, sh, pads[0] + pads[2], 1),
        window_out(x.shape[3], kw, sw, pads[1] + pads[3], 1),
    )


def _max_pool2d(op: nn.MaxPool2dOp, x: np.ndarray) -> np.ndarray:
    # Padding is -inf so that it never wins.
    taps = _pool_taps(op, _pad_hw(x, op.pads, -np.inf), _pool_out_hw(op, x))
    return np.maximum.reduce(taps)


def _avg_pool2d(op: nn.AvgPool2dOp, x: np.ndarray) -> np.ndarray:
    # Each window's sum is divided by the number of real (unpadded) positions.
    out_hw = _pool_out_hw(op, x)
    total = np.add.reduce(_pool_taps(op, _pad_hw(x, op.pads, 0.0), out_hw))
    ones = np.ones((1, 1, *x.shape[2:]), dtype=x.dtype)
    count = np.add.reduce(_pool_taps(op, _pad_hw(ones, op.pads, 0.0), out_hw))
    return total / count


# --- layout ----------------------------------------------------------------------------


def _reshape(op: nn.ReshapeOp, x: np.ndarray) -> np.ndarray:
    return x.reshape(op.result_shape)


def _broadcast_to(op: nn.BroadcastToOp, x: np.ndarray) -> np.ndarray:
    return np.broadcast_to(x, op.result_shape)


def _transpose(op: nn.TransposeOp, x: np.ndarray) -> np.ndarray:
    return np.transpose(x, op.perm)


def _slice(op: nn.SliceOp, x: np.ndarray) -> np.ndarray:
    index = tuple(slice(*bounds) for bounds in zip(op.starts, op.limits, op.strides, strict=True))
    return x[index]


def _concat(op: nn.ConcatOp, *xs: np.ndarray) -> np.ndarray:
    return np.concatenate(xs, axis=op.axis)


def _gather(op: nn.GatherOp, table: np.ndarray, indices: np.ndarray) -> np.ndarray:
    size = table.shape[op.axis]
    # numpy.take wraps negative indices; anything outside [-size, size) is a
    # program error worth a sentence rather than an IndexError from NumPy.
    bad = (indices >= size) | (indices < -size)
    if np.any(bad):
        raise ValueError(
            f"'nn.gather': index {int(indices[bad].flat[0])} is out of range for axis "
            f"{op.axis} of size {size}"
        )
    return np.take(table, indices, axis=op.axis)


OP_FUNCTIONS: dict[type[Operation], OpFunction] = {
    nn.NegOp: _unary(np.negative),
    nn.AbsOp: _unary(np.abs),
    nn.ExpOp: _unary(np.exp),
    nn.LogOp: _unary(np.log),
    nn.SqrtOp: _unary(np.sqrt),
    nn.RsqrtOp: _unary(_rsqrt),
    nn.ReciprocalOp: _unary(_reciprocal),
    nn.TanhOp: _unary(np.tanh),
    nn.ErfOp: _unary(erf),
    nn.SinOp: _unary(np.sin),
    nn.CosOp: _unary(np.cos),
    nn.SigmoidOp: _unary(sigmoid),
    nn.ReluOp: _unary(_relu),
    nn.SiluOp: _unary(_silu),
    nn.GeluOp: _gelu,
    nn.ClampOp: _clamp,
    nn.AddOp: _binary(np.add),
    nn.SubOp: _binary(np.subtract),
    nn.MulOp: _binary(np.multiply),
    nn.DivOp: _binary(np.divide),
    nn.MaxOp: _binary(np.maximum),
    nn.MinOp: _binary(np.minimum),
    nn.PowOp: _binary(np.power),
    nn.CmpOp: _cmp,
    nn.SelectOp: _select,
    nn.CastOp: _cast,
    nn.ConstantOp: _constant,
    nn.ReduceSumOp: _reduction(np.sum),
    nn.ReduceMaxOp: _reduction(np.max),
    nn.ReduceMinOp: _reduction(np.min),
    nn.ReduceMeanOp: _reduction(mean),
    nn.SoftmaxOp: _softmax,
    nn.LogSoftmaxOp: _log_softmax,
    nn.LayerNormOp: _layer_norm,
    nn.RmsNormOp: _rms_norm,
    nn.BatchNormOp: _batch_norm,
    nn.MatmulOp: _matmul,
    nn.Conv2dOp: _conv2d,
    nn.MaxPool2dOp: _max_pool2d,
    nn.AvgPool2dOp: _avg_pool2d,
    nn.ReshapeOp: _reshape,
    nn.BroadcastToOp: _broadcast_to,
    nn.TransposeOp: _transpose,
    nn.SliceOp: _slice,
    nn.ConcatOp: _concat,
    nn.GatherOp: _gather,
}
"""How to run each `nn` op: `OP_FUNCTIONS[type(op)](op, *operand_arrays)`."""

