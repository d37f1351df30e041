"""The rewrites that expand composite `nn` ops (softmax, log_softmax,
layer_norm, rms_norm, batch_norm) into `nn` primitives, each new op carrying
the location of the composite it came from. The `decompose` pass
(`passes/decompose.py`) applies them to a module; code generation
(`analysis/decompose_group.py`) to a copy of a group that still holds one.

```python
patterns = [PATTERNS[name]() for name in ("softmax", "layer_norm")]
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IntegerAttr, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from fusec.analysis.rewriting import copy_location
from fusec.dialects import nn, shapes
from fusec.dialects.nn_base import NNOp, element_type, int_list, tensor_shape

# --- building the expansion ---------------------------------------------------------


@dataclass
class Expansion:
    """The primitive ops that replace one composite, built in program order.

    Intermediate results get readable names derived from the composite's
    result name (`%y` gives `%y_max`, `%y_sum`, ...); the last op takes over
    the composite's own name (or its role, `%softmax`, if it had none).
    """

    source: Operation
    ops: list[Operation] = field(default_factory=list[Operation])

    @property
    def element(self) -> Attribute:
        """The element type of the composite's result."""
        return element_type(self.source.results[0])

    def _emit(self, op: Operation, role: str) -> SSAValue:
        self.ops.append(op)
        prefix = self.source.results[0].name_hint
        op.results[0].name_hint = f"{prefix}_{role}" if prefix else role
        return op.results[0]

    def _type(self, shape: tuple[int, ...]) -> TensorType:
        return TensorType(self.element, shape)

    def unary(self, cls: type[NNOp], x: SSAValue, role: str) -> SSAValue:
        """`%r = nn.exp %x : T` and the like."""
        return self._emit(cls.create(operands=[x], result_types=[x.type]), role)

    def binary(self, cls: type[NNOp], a: SSAValue, b: SSAValue, role: str) -> SSAValue:
        """A broadcasting binary op; the result shape follows NumPy rules."""
        shape = shapes.broadcast_shapes(tensor_shape(a), tensor_shape(b))
        op = cls.create(operands=[a, b], result_types=[self._type(shape)])
        return self._emit(op, role)

    def reduce(self, cls: type[NNOp], x: SSAValue, axes: list[int], role: str) -> SSAValue:
        """A reduction over `axes` with `keepdims = true`, so that its result
        broadcasts back against `x` without a reshape."""
        shape = shapes.reduced_shape(tensor_shape(x), axes, keepdims=True)
        attrs: dict[str, Attribute] = {
            "axes": int_list(axes),
            "keepdims": IntegerAttr.from_bool(True),
        }
        op = cls.create(operands=[x], result_types=[self._type(shape)], attributes=attrs)
        return self._emit(op, role)

    def scalar(self, value: float, role: str) -> SSAValue:
        """A rank-0 constant of the composite's element type: `dense<1.0e-05> : tensor<f32>`."""
        t = self._type(())
        dense = DenseIntOrFPElementsAttr.from_list(t, [value])  # pyright: ignore
        op = nn.ConstantOp.create(result_types=[t], attributes={"value": dense})
        return self._emit(op, role)

    def reshape(self, x: SSAValue, shape: tuple[int, ...], role: str) -> SSAValue:
        """`nn.reshape` to `shape` (same element count)."""
        return self._emit(nn.ReshapeOp.create(operands=[x], result_types=[self._type(shape)]), role)

    def replace_source(self, rewriter: PatternRewriter) -> None:
        """Swap the composite for the built ops; its uses now read the last one."""
        copy_location(self.source, *self.ops)
        # Users of the composite's result keep reading a value of the same name.
        if (name := self.source.results[0].name_hint) is not None:
            self.ops[-1].results[0].name_hint = name
        rewriter.replace(self.source, self.ops)


# --- one pattern per composite ---------------------------------------------------------


class CompositePattern(RewritePattern):
    """Matches one composite op type and replaces it by its `expand`ion."""

    OP: ClassVar[type[NNOp]]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /) -> None:
        if not isinstance(op, self.OP):
            return
        # A fusion contract (`fusion = "never"` / `"must"`) speaks about the op
        # as one unit; spreading it over the primitives would change its
        # meaning, so such a composite stays whole for the fusion passes.
        if "fusion" in op.attributes:
            return
        expansion = Expansion(op)
        self.expand(op, expansion)
        expansion.replace_source(rewriter)

    def expand(self, op: NNOp, b: Expansion) -> None:
        """Append the primitive ops computing `op`'s result to `b`."""
        raise NotImplementedError


class SoftmaxPattern(CompositePattern):
    """`exp(x - max) / sum(exp(x - max))`; subtracting the max keeps exp finite."""

    OP = nn.SoftmaxOp

    def expand(self, op: NNOp, b: Expansion) -> None:
        assert isinstance(op, nn.SoftmaxOp)
        axes = [op.axis]
        m = b.reduce(nn.ReduceMaxOp, op.x, axes, "max")
        e = b.unary(nn.ExpOp, b.binary(nn.SubOp, op.x, m, "shifted"), "exp")
        s = b.reduce(nn.ReduceSumOp, e, axes, "sum")
        b.binary(nn.DivOp, e, s, "softmax")


class LogSoftmaxPattern(CompositePattern):
    """`(x - max) - log(sum(exp(x - max)))`: never takes the log of a tiny quotient."""

    OP = nn.LogSoftmaxOp

    def expand(self, op: NNOp, b: Expansion) -> None:
        assert isinstance(op, nn.LogSoftmaxOp)
        axes = [op.axis]
        m = b.reduce(nn.ReduceMaxOp, op.x, axes, "max")
        d = b.binary(nn.SubOp, op.x, m, "shifted")
        s = b.reduce(nn.ReduceSumOp, b.unary(nn.ExpOp, d, "exp"), axes, "sum")
        b.binary(nn.SubOp, d, b.unary(nn.LogOp, s, "logsum"), "log_softmax")


def _normalized_axes(op: nn.LayerNormOp | nn.RmsNormOp) -> list[int]:
    """The trailing dimensions `axis..rank-1` a norm reduces over."""
    return list(range(op.axis, len(op.operand_shape())))


class LayerNormPattern(CompositePattern):
    """`(x - mean) * rsqrt(mean((x - mean)^2) + eps) * scale + bias`.

    The variance is taken of the centred values (two passes over the row), not
    as `mean(x^2) - mean^2`, which cancels catastrophically for large means.
    `scale` and `bias` have shape `x.shape[axis:]` and broadcast as they are.
    """

    OP = nn.LayerNormOp

    def expand(self, op: NNOp, b: Expansion) -> None:
        assert isinstance(op, nn.LayerNormOp)
        axes = _normalized_axes(op)
        mean = b.reduce(nn.ReduceMeanOp, op.x, axes, "mean")
        centred = b.binary(nn.SubOp, op.x, mean, "centred")
        square = b.binary(nn.MulOp, centred, centred, "square")
        var = b.reduce(nn.ReduceMeanOp, square, axes, "var")
        eps = b.scalar(op.epsilon, "eps")
        inv = b.unary(nn.RsqrtOp, b.binary(nn.AddOp, var, eps, "var_eps"), "inv_std")
        normed = b.binary(nn.MulOp, centred, inv, "normed")
        scaled = b.binary(nn.MulOp, normed, op.scale, "scaled")
        b.binary(nn.AddOp, scaled, op.bias, "layer_norm")


class RmsNormPattern(CompositePattern):
    """`x * rsqrt(mean(x^2) + eps) * scale`."""

    OP = nn.RmsNormOp

    def expand(self, op: NNOp, b: Expansion) -> None:
        assert isinstance(op, nn.RmsNormOp)
        axes = _normalized_axes(op)
        square = b.binary(nn.MulOp, op.x, op.x, "square")
        ms = b.reduce(nn.ReduceMeanOp, square, axes, "mean_square")
        eps = b.scalar(op.epsilon, "eps")
        inv = b.unary(nn.RsqrtOp, b.binary(nn.AddOp, ms, eps, "ms_eps"), "inv_rms")
        normed = b.binary(nn.MulOp, op.x, inv, "normed")
        b.binary(nn.MulOp, normed, op.scale, "rms_norm")


class BatchNormPattern(CompositePattern):
    """Inference batch norm as one multiply-add per element: `x * s + t` with
    `s = scale * rsqrt(var + eps)` and `t = bias - mean * s`.

    The four `[C]` vectors are reshaped to `[C, 1, 1]` first, so they
    broadcast over the channel dimension of NCHW, and the per-channel algebra
    runs in that shape: constant vectors fold to the two vectors at compile
    time (`fold-constants`), and vectors that are arguments (a model's
    parameters through `torch.compile`) are computed inside the kernel that
    applies them (a few operations per element of a memory-bound kernel),
    not by a small kernel of their own per batch norm.
    """

    OP = nn.BatchNormOp

    def expand(self, op: NNOp, b: Expansion) -> None:
        assert isinstance(op, nn.BatchNormOp)
        x_shape = op.operand_shape()
        channel_shape = (x_shape[1],) + (1,) * (len(x_shape) - 2)
        names = ("scale_bcast", "bias_bcast", "mean_bcast", "var_bcast")
        vectors = (op.scale, op.bias, op.mean, op.var)
        if len(x_shape) > 2:  # for [N, C] the [C] vectors already broadcast
            vectors = tuple(b.reshape(v, channel_shape, n) for v, n in zip(vectors, names,
                                                                          strict=True))
        scale, bias, mean, var = vectors
        eps = b.scalar(op.epsilon, "eps")
        inv = b.unary(nn.RsqrtOp, b.binary(nn.AddOp, var, eps, "var_eps"), "inv_std")
        s = b.binary(nn.MulOp, scale, inv, "scale_eff")
        t = b.binary(nn.SubOp, bias, b.binary(nn.MulOp, mean, s, "mean_scaled"), "bias_eff")
        b.binary(nn.AddOp, b.binary(nn.MulOp, op.x, s, "scaled"), t, "batch_norm")


# Short names (as in `decompose{ops=softmax,layer_norm}`) to patterns.
PATTERNS: dict[str, type[CompositePattern]] = {
    "softmax": SoftmaxPattern,
    "log_softmax": LogSoftmaxPattern,
    "layer_norm": LayerNormPattern,
    "rms_norm": RmsNormPattern,
    "batch_norm": BatchNormPattern,
}
