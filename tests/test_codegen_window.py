"""Window kernels (conv2d, max/avg pool) in numba's CUDA simulator against the
reference interpreter: every geometry option alone (the fusion-off
baseline) and a conv with its bias + clamp epilogue as ONE kernel."""

from __future__ import annotations

import pytest

from fusec.analysis.diagnostics import FusecError
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.fusion import GroupOp
from fusec.dialects.shapes import conv2d_shape, pool2d_shape
from tests.codegen_harness import check_program, emit_scheduled, tensor


def _conv_program(
    x: tuple[int, int, int, int],
    w: tuple[int, int, int, int],
    strides: list[int],
    pads: list[int],
    dilations: list[int],
    groups: int,
) -> str:
    out = tensor(conv2d_shape(x, w, strides, pads, dilations, groups))
    attrs = f"strides = {strides}, pads = {pads}, dilations = {dilations}, groups = {groups}"
    return f"""
func.func @f(%x: {tensor(x)}, %w: {tensor(w)}) -> {out} {{
  %y = nn.conv2d %x, %w {{{attrs}}} : ({tensor(x)}, {tensor(w)}) -> {out}
  func.return %y : {out}
}}"""


@pytest.mark.parametrize(
    ("x", "w", "strides", "pads", "dilations", "groups"),
    [
        ((1, 3, 7, 7), (4, 3, 3, 3), [2, 2], [1, 1, 1, 1], [1, 1], 1),  # stride 2, pads
        ((2, 2, 6, 7), (3, 2, 3, 2), [1, 1], [2, 0, 1, 1], [2, 2], 1),  # dilation 2, uneven pads
        ((1, 4, 5, 5), (6, 2, 3, 3), [1, 2], [1, 1, 1, 1], [1, 1], 2),  # groups 2
        ((1, 4, 6, 6), (4, 1, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1], 4),  # depthwise
        ((2, 5, 4, 4), (3, 5, 1, 1), [1, 1], [0, 0, 0, 0], [1, 1], 1),  # 1x1
    ],
)
def test_conv2d(
    x: tuple[int, int, int, int],
    w: tuple[int, int, int, int],
    strides: list[int],
    pads: list[int],
    dilations: list[int],
    groups: int,
) -> None:
    check_program(_conv_program(x, w, strides, pads, dilations, groups), pipeline="group-each-op")


@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d"])
@pytest.mark.parametrize(
    ("kernel", "strides", "pads"),
    [
        ([3, 3], [2, 2], [1, 1, 1, 1]),
        ([2, 3], [1, 2], [0, 1, 1, 0]),
        ([2, 2], [2, 2], [0, 0, 0, 0]),
    ],
)
def test_pool(op: str, kernel: list[int], strides: list[int], pads: list[int]) -> None:
    x = (1, 2, 7, 6)
    out = tensor(pool2d_shape(x, kernel, strides, pads))
    text = f"""
func.func @f(%x: {tensor(x)}) -> {out} {{
  %y = nn.{op} %x {{kernel = {kernel}, strides = {strides}, pads = {pads}}}
      : ({tensor(x)}) -> {out}
  func.return %y : {out}
}}"""
    check_program(text, pipeline="group-each-op")


CONV_BIAS_RELU6 = """
func.func @f(%x: tensor<1x3x6x6xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4x1x1xf32>)
    -> (tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>) {
  %y, %c = fusion.group (%x, %w, %b) {name = "g0", kind = "window"}
      : (tensor<1x3x6x6xf32>, tensor<4x3x3x3xf32>, tensor<4x1x1xf32>)
      -> (tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>) {
  ^bb0(%xa: tensor<1x3x6x6xf32>, %wa: tensor<4x3x3x3xf32>, %ba: tensor<4x1x1xf32>):
    %cv = nn.conv2d %xa, %wa {pads = [1, 1, 1, 1]}
        : (tensor<1x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
    %s = nn.add %cv, %ba : (tensor<1x4x6x6xf32>, tensor<4x1x1xf32>) -> tensor<1x4x6x6xf32>
    %r = nn.clamp %s {min = 0.0, max = 6.0} : tensor<1x4x6x6xf32>
    fusion.yield %r, %cv : tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>
  }
  func.return %y, %c : tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>
}"""


def test_conv_bias_clamp_epilogue_one_kernel() -> None:
    check_program(CONV_BIAS_RELU6)


def test_pool_then_relu_epilogue() -> None:
    text = """
func.func @f(%x: tensor<1x2x5x5xf32>) -> tensor<1x2x5x5xf32> {
  %y = fusion.group (%x) {name = "g0", kind = "window"}
      : (tensor<1x2x5x5xf32>) -> tensor<1x2x5x5xf32> {
  ^bb0(%a: tensor<1x2x5x5xf32>):
    %p = nn.avg_pool2d %a {kernel = [3, 3], pads = [1, 1, 1, 1]}
        : (tensor<1x2x5x5xf32>) -> tensor<1x2x5x5xf32>
    %r = nn.relu %p : tensor<1x2x5x5xf32>
    fusion.yield %r : tensor<1x2x5x5xf32>
  }
  func.return %y : tensor<1x2x5x5xf32>
}"""
    check_program(text)


def test_depthwise_has_no_channel_loop() -> None:
    text = _conv_program((1, 4, 6, 6), (4, 1, 3, 3), [1, 1], [1, 1, 1, 1], [1, 1], 4)
    module = parse_module(make_context(), text, "test.mlir")
    from fusec.passes.group_each_op import GroupEachOpPass

    GroupEachOpPass().apply(make_context(), module)
    group = next(op for op in module.walk() if isinstance(op, GroupOp))
    assert "for ci in range" not in emit_scheduled(group).text


def test_relu_prologue_before_pool() -> None:
    text = """
func.func @f(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32> {
  %y = fusion.group (%x) {name = "g0", kind = "window"}
      : (tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32> {
  ^bb0(%a: tensor<1x1x4x4xf32>):
    %r = nn.relu %a : tensor<1x1x4x4xf32>
    %p = nn.max_pool2d %r {kernel = [2, 2], strides = [2, 2]}
        : (tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32>
    fusion.yield %p : tensor<1x1x2x2xf32>
  }
  func.return %y : tensor<1x1x2x2xf32>
}"""
    check_program(text)


def test_conv_with_transposed_weight_prologue() -> None:
    text = """
func.func @f(%x: tensor<1x2x5x5xf32>, %w: tensor<2x3x3x3xf32>) -> tensor<1x3x3x3xf32> {
  %y = fusion.group (%x, %w) {name = "g0", kind = "window"}
      : (tensor<1x2x5x5xf32>, tensor<2x3x3x3xf32>) -> tensor<1x3x3x3xf32> {
  ^bb0(%a: tensor<1x2x5x5xf32>, %wa: tensor<2x3x3x3xf32>):
    %wt = nn.transpose %wa {perm = [1, 0, 2, 3]} : (tensor<2x3x3x3xf32>) -> tensor<3x2x3x3xf32>
    %c = nn.conv2d %a, %wt : (tensor<1x2x5x5xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x3x3xf32>
    fusion.yield %c : tensor<1x3x3x3xf32>
  }
  func.return %y : tensor<1x3x3x3xf32>
}"""
    check_program(text)


def test_reduction_in_a_window_group_is_refused() -> None:
    text = """
func.func @f(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x2x1xf32> {
  %y = fusion.group (%x) {name = "g0", kind = "window"}
      : (tensor<1x1x4x4xf32>) -> tensor<1x1x2x1xf32> {
  ^bb0(%a: tensor<1x1x4x4xf32>):
    %p = nn.max_pool2d %a {kernel = [2, 2], strides = [2, 2]}
        : (tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32>
    %s = nn.reduce_sum %p {axes = [3], keepdims = true}
        : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x1xf32>
    fusion.yield %s : tensor<1x1x2x1xf32>
  }
  func.return %y : tensor<1x1x2x1xf32>
}"""
    module = parse_module(make_context(), text, "test.mlir")
    group = next(op for op in module.walk() if isinstance(op, GroupOp))
    with pytest.raises(FusecError, match="cannot be fused into the epilogue"):
        emit_scheduled(group)
