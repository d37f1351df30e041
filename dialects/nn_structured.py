"""`nn` ops beyond elementwise and reductions: composites, contractions,
windows and layout ops. Part of the `nn` dialect (see `nn.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue
from xdsl.irdl import irdl_op_definition, operand_def, result_def, var_operand_def

from fusec.dialects import shapes
from fusec.dialects.nn_base import (
    FLOAT_TYPES,
    INT_TYPES,
    NNOp,
    element_type,
    element_type_name,
    format_float,
    type_str,
)
from fusec.dialects.shapes import fmt

# --- composites ---------------------------------------------------------------


class SoftmaxLikeOp(NNOp):
    """Normalization over one axis; result type equals operand type."""

    ATTRIBUTES: ClassVar[tuple[str, ...]] = ("axis",)

    SAME_TYPE_SYNTAX: ClassVar[bool] = True
    x = operand_def(TensorType)
    result = result_def(TensorType)

    @property
    def axis(self) -> int:
        """The normalized axis, in `[0, rank)`."""
        return shapes.normalize_axis(self.int_attr("axis", -1), len(self.operand_shape()))

    def check(self) -> None:
        self.expect_element(0, FLOAT_TYPES, "floating-point")
        if self.x.type != self.result.type:
            raise self._fail(
                f"result type {type_str(self.result.type)} must equal the operand "
                f"type {type_str(self.x.type)}"
            )
        _ = self.axis


@irdl_op_definition
class SoftmaxOp(SoftmaxLikeOp):
    """`exp(x - max) / sum(exp(x - max))` along `axis` (default -1).

    ```mlir
    %y = nn.softmax %x {axis = -1} : tensor<4x8xf32>
    ```
    """

    name = "nn.softmax"


@irdl_op_definition
class LogSoftmaxOp(SoftmaxLikeOp):
    """`x - max - log(sum(exp(x - max)))` along `axis` (default -1).

    ```mlir
    %y = nn.log_softmax %x {axis = -1} : tensor<4x8xf32>
    ```
    """

    name = "nn.log_softmax"


class NormOp(NNOp):
    """Normalization over the trailing dimensions `axis..rank-1`; every
    parameter has shape `x.shape[axis:]`."""

    DEFAULT_EPSILON: ClassVar[float] = 1.0e-05
    ATTRIBUTES: ClassVar[tuple[str, ...]] = ("axis", "epsilon")

    @property
    def x(self) -> SSAValue:
        return self.operands[0]

    @property
    def axis(self) -> int:
        return shapes.normalize_axis(self.int_attr("axis", -1), len(self.operand_shape()))

    @property
    def epsilon(self) -> float:
        eps = self.float_attr("epsilon", self.DEFAULT_EPSILON)
        assert eps is not None
        return eps

    def param_shape(self) -> tuple[int, ...]:
        return self.operand_shape()[self.axis :]

    def check(self) -> None:
        self.expect_element(0, FLOAT_TYPES, "floating-point")
        if self.x.type != self.results[0].type:
            raise self._fail(
                f"result type {type_str(self.results[0].type)} must equal the type of "
                f"operand #0, {type_str(self.x.type)}"
            )
        expected = self.param_shape()
        for i in range(1, len(self.operands)):
            if element_type(self.operands[i]) != element_type(self.x):
                raise self._fail(
                    f"operand #{i} has element type "
                    f"{element_type_name(element_type(self.operands[i]))}, expected "
                    f"{element_type_name(element_type(self.x))} (that of operand #0)"
                )
            if self.operand_shape(i) != expected:
                raise self._fail(
                    f"operand #{i} has shape {fmt(self.operand_shape(i))}, expected "
                    f"{fmt(expected)} (the dimensions from axis {self.axis} on)"
                )
        if self.epsilon <= 0:
            raise self._fail(f"epsilon must be positive, got {format_float(self.epsilon)}")


@irdl_op_definition
class LayerNormOp(NormOp):
    """Layer normalization (ONNX LayerNormalization) with scale and bias.

    ```mlir
    %y = nn.layer_norm %x, %g, %b {axis = -1, epsilon = 1.0e-05}
        : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    ```
    """

    name = "nn.layer_norm"
    ARITY: ClassVar[int | None] = 3
    input = operand_def(TensorType)
    scale = operand_def(TensorType)
    bias = operand_def(TensorType)
    result = result_def(TensorType)


@irdl_op_definition
class RmsNormOp(NormOp):
    """RMS normalization, `x / sqrt(mean(x^2) + eps) * scale`.

    ```mlir
    %y = nn.rms_norm %x, %g {axis = -1, epsilon = 1.0e-06}
        : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    ```
    """

    name = "nn.rms_norm"
    ARITY: ClassVar[int | None] = 2
    DEFAULT_EPSILON: ClassVar[float] = 1.0e-06
    input = operand_def(TensorType)
    scale = operand_def(TensorType)
    result = result_def(TensorType)


@irdl_op_definition
class BatchNormOp(NNOp):
    """Inference batch normalization over channel dimension 1 (NCHW).

    ```mlir
    %y = nn.batch_norm %x, %s, %b, %m, %v {epsilon = 1.0e-05}
        : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>,
           tensor<3xf32>) -> tensor<2x3x4x4xf32>
    ```
    """

    name = "nn.batch_norm"
    ATTRIBUTES: ClassVar[tuple[str, ...]] = ("epsilon",)
    ARITY: ClassVar[int | None] = 5
    x = operand_def(TensorType)
    scale = operand_def(TensorType)
    bias = operand_def(TensorType)
    mean = operand_def(TensorType)
    var = operand_def(TensorType)
    result = result_def(TensorType)

    @property
    def epsilon(self) -> float:
        eps = self.float_attr("epsilon", 1.0e-05)
        assert eps is not None
        return eps

    def check(self) -> None:
        self.expect_element(0, FLOAT_TYPES, "floating-point")
        shape = self.operand_shape()
        if len(shape) < 2:
            raise self._fail(f"input must have rank >= 2 (N, C, ...), got {fmt(shape)}")
        if self.x.type != self.result.type:
            raise self._fail(
                f"result type {type_str(self.result.type)} must equal the type of "
                f"operand #0, {type_str(self.x.type)}"
            )
        for i, what in enumerate(("scale", "bias", "mean", "var"), start=1):
            if self.operand_shape(i) != (shape[1],):
                raise self._fail(
                    f"{what} (operand #{i}) has shape {fmt(self.operand_shape(i))}, "
                    f"expected {shape[1]} (the channel count)"
                )
            if element_type(self.operands[i]) != element_type(self.x):
                raise self._fail(
                    f"{what} (operand #{i}) has element type "
                    f"{element_type_name(element_type(self.operands[i]))}, expected "
                    f"{element_type_name(element_type(self.x))} (that of the input)"
                )
        if self.epsilon <= 0:
            raise self._fail(f"epsilon must be positive, got {format_float(self.epsilon)}")


# --- contractions and windows ---------------------------------------------------------


@irdl_op_definition
class MatmulOp(NNOp):
    """NumPy `matmul` for rank >= 2; batch dimensions broadcast.

    ```mlir
    %c = nn.matmul %a, %b : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
    ```
    """

    name = "nn.matmul"
    ARITY: ClassVar[int | None] = 2
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)

    def check(self) -> None:
        a = self.expect_element(0, FLOAT_TYPES, "floating-point")
        b = self.expect_element(1, FLOAT_TYPES, "floating-point")
        if a != b:
            raise self._fail(f"operand element types differ: {a} and {b}")
        self.expect_same_result_element()
        self.expect_result_shape(shapes.matmul_shape(self.operand_shape(0), self.operand_shape(1)))


class WindowOp(NNOp):
    """Shared attribute checks of conv2d and the pools."""

    def pair(self, key: str, default: tuple[int, int], minimum: int) -> list[int]:
        vals = self.int_list_attr(key, default)
        if len(vals) != 2:
            raise self._fail(f"attribute '{key}' must have 2 entries (H, W), got {len(vals)}")
        if any(v < minimum for v in vals):
            raise self._fail(f"attribute '{key}' entries must be >= {minimum}, got {vals}")
        return vals

    @property
    def pads(self) -> list[int]:
        """[top, left, bottom, right]."""
        vals = self.int_list_attr("pads", (0, 0, 0, 0))
        if len(vals) != 4:
            raise self._fail(
                f"attribute 'pads' must have 4 entries [top, left, bottom, right], got {len(vals)}"
            )
        if any(v < 0 for v in vals):
            raise self._fail(f"attribute 'pads' entries must be >= 0, got {vals}")
        return vals

    @property
    def strides(self) -> list[int]:
        return self.pair("strides", (1, 1), 1)


NCHW, NHWC = "nchw", "nhwc"
CONV_LAYOUTS = (NCHW, NHWC)
TO_LAST = (0, 2, 3, 1)
"""The transpose `perm` from channels first (NCHW, OIHW) to channels last
(NHWC, OHWI)."""
TO_FIRST = (0, 3, 1, 2)
"""The transpose `perm` from channels last back to channels first."""


def to_last(shape: Sequence[int]) -> tuple[int, ...]:
    """An NCHW (OIHW) shape as NHWC (OHWI)."""
    return tuple(shape[p] for p in TO_LAST)


def to_first(shape: Sequence[int]) -> tuple[int, ...]:
    """An NHWC (OHWI) shape as NCHW (OIHW)."""
    return tuple(shape[p] for p in TO_FIRST)


@irdl_op_definition
class Conv2dOp(WindowOp):
    """2-D cross-correlation, NCHW input and OIHW weight, as ONNX Conv (no bias).

    ```mlir
    %y = nn.conv2d %x, %w {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1}
        : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
    ```

    `layout = "nhwc"` (channels last) takes an NHWC input and an OHWI weight
    and gives an NHWC result, the same convolution with the channels
    innermost; `channels-last` writes it for the convolutions cuDNN computes,
    and only cuDNN computes it (`passes/channels_last.py`).
    """

    name = "nn.conv2d"
    ATTRIBUTES: ClassVar[tuple[str, ...]] = ("strides", "pads", "dilations", "groups", "layout")
    ARITY: ClassVar[int | None] = 2
    x = operand_def(TensorType)
    weight = operand_def(TensorType)
    result = result_def(TensorType)

    @property
    def dilations(self) -> list[int]:
        return self.pair("dilations", (1, 1), 1)

    @property
    def groups(self) -> int:
        return self.int_attr("groups", 1)

    @property
    def layout(self) -> str:
        """"nchw" (the default: NCHW input, OIHW weight) or "nhwc"."""
        layout = self.str_attr("layout", NCHW)
        if layout not in CONV_LAYOUTS:
            raise self._fail(f'unknown layout "{layout}"; expected "nchw" or "nhwc"')
        return layout

    @property
    def channels_last(self) -> bool:
        """Whether the input, weight and result hold their channels innermost."""
        return self.layout == NHWC

    @property
    def channel_axis(self) -> int:
        """The axis of the input's and the result's channels."""
        return 3 if self.channels_last else 1

    def check(self) -> None:
        a = self.expect_element(0, FLOAT_TYPES, "floating-point")
        b = self.expect_element(1, FLOAT_TYPES, "floating-point")
        if a != b:
            raise self._fail(f"operand element types differ: {a} and {b}")
        self.expect_same_result_element()
        if self.groups < 1:
            raise self._fail(f"groups must be >= 1, got {self.groups}")
        x, w = self.operand_shape(0), self.operand_shape(1)
        last = self.channels_last
        if last and (len(x) != 4 or len(w) != 4):
            raise self._fail(f"input and weight must have rank 4, got {list(x)} and {list(w)}")
        expected = shapes.conv2d_shape(
            to_first(x) if last else x, to_first(w) if last else w, self.strides, self.pads,
            self.dilations, self.groups,
        )
        self.expect_result_shape(to_last(expected) if last else expected)


class PoolOp(WindowOp):
    """Max or average pooling over NCHW."""

    ATTRIBUTES: ClassVar[tuple[str, ...]] = ("kernel", "strides", "pads")

    x = operand_def(TensorType)
    result = result_def(TensorType)

    @property
    def kernel(self) -> list[int]:
        return self.pair("kernel", (3, 3), 1)

    def check(self) -> None:
        self.expect_element(0, FLOAT_TYPES, "floating-point")
        self.expect_same_result_element()
        kernel, pads = self.kernel, self.pads
        # pads are [top, left, bottom, right]: top/bottom against KH, left/right against KW
        if any(p >= kernel[i % 2] for i, p in enumerate(pads)):
            raise self._fail(
                f"pads {pads} must be smaller than the {kernel[0]}x{kernel[1]} window, "
                "or some windows would hold only padding"
            )
        self.expect_result_shape(
            shapes.pool2d_shape(self.operand_shape(), kernel, self.strides, pads)
        )


@irdl_op_definition
class MaxPool2dOp(PoolOp):
    """Max pooling; padding never wins.

    ```mlir
    %y = nn.max_pool2d %x {kernel = [2, 2], strides = [2, 2]}
        : (tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32>
    ```
    """

    name = "nn.max_pool2d"


@irdl_op_definition
class AvgPool2dOp(PoolOp):
    """Average pooling; padded positions are not counted in the average.

    ```mlir
    %y = nn.avg_pool2d %x {kernel = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1]}
        : (tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32>
    ```
    """

    name = "nn.avg_pool2d"


# --- layout ----------------------------------------------------------------------


class LayoutOp(NNOp):
    """One operand, one result of the same element type."""

    x = operand_def(TensorType)
    result = result_def(TensorType)

    def check(self) -> None:
        self.expect_same_result_element()
        self.check_layout()

    def check_layout(self) -> None:
        """The op's shape rule."""


@irdl_op_definition
class ReshapeOp(LayoutOp):
    """Same elements, new shape (row-major order).

    ```mlir
    %y = nn.reshape %x : (tensor<4x8xf32>) -> tensor<2x16xf32>
    ```
    """

    name = "nn.reshape"

    def check_layout(self) -> None:
        src, dst = self.operand_shape(), self.result_shape
        if shapes.numel(src) != shapes.numel(dst):
            raise self._fail(
                f"cannot reshape {fmt(src)} ({shapes.numel(src)} elements) into "
                f"{fmt(dst)} ({shapes.numel(dst)} elements)"
            )


@irdl_op_definition
class BroadcastToOp(LayoutOp):
    """Broadcast to the result shape by NumPy rules.

    ```mlir
    %y = nn.broadcast_to %x : (tensor<8xf32>) -> tensor<4x8xf32>
    ```
    """

    name = "nn.broadcast_to"

    def check_layout(self) -> None:
        src, dst = self.operand_shape(), self.result_shape
        ok = len(src) <= len(dst) and all(
            s in (1, d) for s, d in zip(reversed(src), reversed(dst), strict=False)
        )
        if not ok:
            raise self._fail(f"cannot broadcast {fmt(src)} to {fmt(dst)}")


@irdl_op_definition
class TransposeOp(LayoutOp):
    """Permute dimensions: result dimension i is operand dimension `perm[i]`.

    ```mlir
    %y = nn.transpose %x {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
    ```
    """

    name = "nn.transpose"
    ATTRIBUTES: ClassVar[tuple[str, ...]] = ("perm",)

    @property
    def perm(self) -> list[int]:
        return self.int_list_attr("perm")

    def check_layout(self) -> None:
        src, perm = self.operand_shape(), self.perm
        if sorted(perm) != list(range(len(src))):
            raise self._fail(
                f"perm {perm} is not a permutation of 0..{len(src) - 1} (the operand has "
                f"rank {len(src)})"
            )
        self.expect_result_shape(tuple(src[p] for p in perm))


@irdl_op_definition
class SliceOp(LayoutOp):
    """Static strided slice, `x[starts:limits:strides]` per dimension.

    ```mlir
    %y = nn.slice %x {starts = [0, 2], limits = [4, 8], strides = [1, 2]}
        : (tensor<4x8xf32>) -> tensor<4x3xf32>
    ```
    """

    name = "nn.slice"
    ATTRIBUTES: ClassVar[tuple[str, ...]] = ("starts", "limits", "strides")

    @property
    def starts(self) -> list[int]:
        return self.int_list_attr("starts")

    @property
    def limits(self) -> list[int]:
        return self.int_list_attr("limits")

    @property
    def strides(self) -> list[int]:
        return self.int_list_attr("strides", [1] * len(self.operand_shape()))

    def check_layout(self) -> None:
        self.expect_result_shape(
            shapes.slice_shape(self.operand_shape(), self.starts, self.limits, self.strides)
        )


@irdl_op_definition
class ConcatOp(NNOp):
    """Concatenate along `axis` (default 0).

    ```mlir
    %y = nn.concat %a, %b {axis = 1} : (tensor<4x2xf32>, tensor<4x3xf32>) -> tensor<4x5xf32>
    ```
    """

    name = "nn.concat"
    ATTRIBUTES: ClassVar[tuple[str, ...]] = ("axis",)
    ARITY: ClassVar[int | None] = None
    inputs = var_operand_def(TensorType)
    result = result_def(TensorType)

    @property
    def axis(self) -> int:
        return shapes.normalize_axis(self.int_attr("axis", 0), len(self.operand_shape()))

    def check(self) -> None:
        if not self.inputs:
            raise self._fail("needs at least one operand")
        names = {element_type_name(element_type(v)) for v in self.inputs}
        if len(names) > 1:
            raise self._fail("operand element types differ: " + " and ".join(sorted(names)))
        self.expect_same_result_element()
        all_shapes = [self.operand_shape(i) for i in range(len(self.inputs))]
        self.expect_result_shape(shapes.concat_shape(all_shapes, self.axis))


@irdl_op_definition
class GatherOp(NNOp):
    """`numpy.take(table, indices, axis)`: rows of `table` picked by integer indices.

    ```mlir
    %y = nn.gather %table, %ids {axis = 0} : (tensor<100x16xf32>, tensor<4xi64>) -> tensor<4x16xf32>
    ```
    """

    name = "nn.gather"
    ATTRIBUTES: ClassVar[tuple[str, ...]] = ("axis",)
    ARITY: ClassVar[int | None] = 2
    table = operand_def(TensorType)
    indices = operand_def(TensorType)
    result = result_def(TensorType)

    @property
    def axis(self) -> int:
        return shapes.normalize_axis(self.int_attr("axis", 0), len(self.operand_shape()))

    def check(self) -> None:
        if not self.operand_shape():
            raise self._fail("the table must have rank >= 1")
        self.expect_element(1, INT_TYPES, "integer (i32 or i64)")
        self.expect_same_result_element()
        self.expect_result_shape(
            shapes.gather_shape(self.operand_shape(0), self.operand_shape(1), self.axis)
        )
        if self.operand_shape(0)[self.axis] == 0 and 0 not in self.operand_shape(1):
            # No index is in range of an empty axis.
            count = shapes.numel(self.operand_shape(1))
            raise self._fail(f"gathers from axis {self.axis} of size 0 with {count} "
                             "index(es): none can be in range")
