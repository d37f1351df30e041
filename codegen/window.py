"""Kernels for `kind = "window"` groups: one `nn.conv2d`, `nn.max_pool2d` or
`nn.avg_pool2d` (NCHW, OIHW weights) with the group's elementwise epilogue
applied in registers before the store (conv + bias + relu6 is one kernel).

```mlir
%y = fusion.group (%x, %w, %b) {kind = "window"} : (...) -> tensor<1x4x8x8xf32> {
^bb0(%xa: tensor<1x3x8x8xf32>, %wa: tensor<4x3x3x3xf32>, %ba: tensor<4x1x1xf32>):
  %c = nn.conv2d %xa, %wa {pads = [1, 1, 1, 1]} : (...) -> tensor<1x4x8x8xf32>
  %s = nn.add %c, %ba : (tensor<1x4x8x8xf32>, tensor<4x1x1xf32>) -> tensor<1x4x8x8xf32>
  %r = nn.clamp %s {min = 0.0, max = 6.0} : tensor<1x4x8x8xf32>
  fusion.yield %r : tensor<1x4x8x8xf32>
}
```

Schedule: one thread per output element in a grid-stride loop, consecutive
threads on consecutive output columns (so input rows are read coalesced and a
warp shares its weights). Any strides, pads, dilations and groups; the
channel loop disappears for depthwise convolutions (one input channel per
group) and the bounds checks disappear without padding. Average pooling
divides by the number of taps inside the input (padding is not counted).
An operand computed in the group (`relu` before a pool) is evaluated per tap
(`operand_reader`); padding taps are skipped, as if padded after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import BlockArgument, SSAValue

from fusec.codegen.decompose_group import decomposed
from fusec.codegen.group_body import (
    POINT_KINDS,
    GroupBody,
    PointEvaluator,
    compute_type,
    fits_domain,
    indent,
    load_expr,
    store_lines,
)
from fusec.codegen.kernel_source import (
    KernelSource,
    float_literal,
    grid_stride_launch,
    int_literal,
    kernel_header,
    launch_text,
    sanitize_identifier,
    unravel,
)
from fusec.codegen.operand_reader import fused_prologue, read_at
from fusec.compiler.diagnostics import op_error
from fusec.compiler.op_kinds import OpKind, op_kind
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import Shape, fmt, numel

WindowOp = nn.Conv2dOp | nn.MaxPool2dOp | nn.AvgPool2dOp


@dataclass
class WindowShape:
    """The window op of a group and the geometry of its taps."""

    body: GroupBody
    op: WindowOp
    x: SSAValue  # a group input, or computed from them by a prologue (`operand_reader`)
    out: Shape  # (N, C_out, OH, OW)
    kernel: tuple[int, int]
    strides: list[int]
    pads: list[int]  # top, left, bottom, right
    dilations: list[int]

    @property
    def in_shape(self) -> Shape:
        return tensor_shape(self.x)


def analyze(body: GroupBody) -> WindowShape:
    """Check that the group is one window op (operands from group inputs,
    optionally through a prologue of elementwise ops and transposes) plus an
    elementwise epilogue over its result; raise a located error if not."""
    wins = [op for op in body.ops if op_kind(op) == OpKind.WINDOW]
    if len(wins) != 1:
        raise op_error(
            body.group, f"a window group must hold exactly one window op, found {len(wins)}"
        )
    op = wins[0]
    assert isinstance(op, WindowOp)
    prologue = fused_prologue(op)
    out = op.result_shape
    for other in body.ops:
        if other is op or other in prologue or isinstance(other, nn.ConstantOp):
            continue
        if op_kind(other) not in POINT_KINDS or not fits_domain(
            tensor_shape(other.results[0]), out
        ):
            raise op_error(other, f"{other.name} cannot be fused into the epilogue of {op.name} "
                           f"(elementwise ops broadcasting to {fmt(out)} only)")
    for v in body.outputs:
        if not fits_domain(tensor_shape(v), out):
            raise op_error(body.group, f"group output of shape {fmt(tensor_shape(v))} does not "
                           f"broadcast to the {op.name} result {fmt(out)}")
    x = op.operands[0]
    if isinstance(op, nn.Conv2dOp):
        kh, kw = op.operand_shape(1)[2:]
        return WindowShape(body, op, x, out, (kh, kw), op.strides, op.pads, op.dilations)
    kernel = op.kernel
    return WindowShape(body, op, x, out, (kernel[0], kernel[1]), op.strides, op.pads, [1, 1])


def emit(group: GroupOp, kernel_name: str) -> KernelSource:
    """The kernel of a `kind = "window"` group (see the module docstring)."""
    with decomposed(group) as flat:
        body = GroupBody.of(flat)
        if sum(op_kind(op) == OpKind.WINDOW for op in body.ops) == 2:  # conv + pool
            from fusec.codegen.conv_pool import emit as emit_conv_pool

            return emit_conv_pool(flat, kernel_name, body)
        w = analyze(body)
        name = sanitize_identifier(kernel_name)
        total = numel(w.out)
        grid, block = grid_stride_launch(total)
        notes = [_describe(w)]
        launch = launch_text(grid, block, "one output per thread")
        head = kernel_header(flat, body.ops, launch, notes)
        lines = [
            f"for flat in range(cuda.grid(1), {int_literal(total)}, cuda.gridsize(1)):",
            *indent(_point_lines(w), 1),
        ]
        signature = f"def {name}({body.signature()}):"
        text = "\n".join([*head, "@cuda.jit", signature, *indent(lines, 1)])
        return KernelSource(name, text, grid, block, body.params(), shared_bytes=0, notes=notes)


def _describe(w: WindowShape) -> str:
    what = w.op.name
    if isinstance(w.op, nn.Conv2dOp):
        what += f" groups={w.op.groups}"
    return (
        f"{what} {fmt(w.in_shape)} -> {fmt(w.out)}, window {w.kernel[0]}x{w.kernel[1]}, "
        f"strides {w.strides}, pads {w.pads}, dilations {w.dilations}"
    )


def _point_lines(w: WindowShape) -> list[str]:
    """One output element: coordinates, the window, the epilogue, the stores."""
    lines, coords = unravel("flat", w.out, prefix="o")
    lines += _accumulate(w)
    ev = PointEvaluator(w.body, w.out, coords, bound={w.op.results[0]: "res"})
    for k, v in enumerate(w.body.outputs):
        val = ev.value(v)
        lines += ev.take_lines()
        lines += store_lines(k, v, val, w.out, coords)
    return lines


def _tap_loops(w: WindowShape, inner: list[str]) -> list[str]:
    """`for kh: ih = ...; for kw: iw = ...; inner`, with bounds checks only
    where padding can put a tap outside the input."""
    _, _, h, wd = w.in_shape
    sh, sw = w.strides
    dh, dw = w.dilations
    pt, pl = w.pads[0], w.pads[1]
    row_check = w.pads[0] > 0 or w.pads[2] > 0
    col_check = w.pads[1] > 0 or w.pads[3] > 0
    cols = [
        f"iw = o3 * {int_literal(sw)} - {int_literal(pl)} + kw * {int_literal(dw)}",
        *([f"if 0 <= iw < {int_literal(wd)}:", *indent(inner, 1)] if col_check else inner),
    ]
    rows = [
        f"ih = o2 * {int_literal(sh)} - {int_literal(pt)} + kh * {int_literal(dh)}",
        f"x_row = (x_plane + ih) * {int_literal(wd)}",
        f"for kw in range({int_literal(w.kernel[1])}):",
        *indent(cols, 1),
    ]
    body = [f"if 0 <= ih < {int_literal(h)}:", *indent(rows[1:], 1)] if row_check else rows[1:]
    return [f"for kh in range({int_literal(w.kernel[0])}):", *indent([rows[0], *body], 1)]


def _tap(body: GroupBody, v: SSAValue, direct: str, coords: list[str]) -> tuple[list[str], str]:
    """An operand element: `direct` indexes a group input; a value computed
    by a prologue is evaluated at its `coords` instead."""
    if isinstance(v, BlockArgument):
        return [], load_expr(body, v, direct)
    return read_at(body, v, coords, "_tap")


def _accumulate(w: WindowShape) -> list[str]:
    """`res` = the window op's value at output (o0, o1, o2, o3)."""
    ctype = compute_type(w.op.results[0])
    _, c, h, _ = w.in_shape
    plane = f"x_plane = (o0 * {int_literal(c)} + o1) * {int_literal(h)}"  # pools: channel o1
    if isinstance(w.op, nn.Conv2dOp):
        return _conv_lines(w, ctype)
    reads, x_at = _tap(w.body, w.x, "x_row + iw", ["o0", "o1", "ih", "iw"])
    if isinstance(w.op, nn.MaxPool2dOp):
        init = [f"res = {float_literal(-float('inf'), ctype)}", plane]
        return init + _tap_loops(w, [*reads, f"res = max(res, {x_at})"])
    init = [f"res = {float_literal(0.0, ctype)}", "taps = 0", plane]
    loops = _tap_loops(w, [*reads, f"res += {x_at}", "taps += 1"])
    return [*init, *loops, f"res = res / {ctype}(taps)"]


def _conv_lines(w: WindowShape, ctype: str) -> list[str]:
    op = w.op
    assert isinstance(op, nn.Conv2dOp)
    _, c, h, _ = w.in_shape
    o_total = w.out[1]
    per_group_in = c // op.groups
    per_group_out = o_total // op.groups
    kh, kw = w.kernel
    x_reads, x_at = _tap(w.body, w.x, "x_row + iw", ["o0", "xc", "ih", "iw"])
    w_direct = f"w_base + kh * {int_literal(kw)} + kw"
    w_reads, w_at = _tap(w.body, op.operands[1], w_direct, ["o1", "ci", "kh", "kw"])
    tap = [*x_reads, *w_reads, f"res += {x_at} * {w_at}"]
    channel = [
        "xc = c_first + ci",
        f"x_plane = (o0 * {int_literal(c)} + xc) * {int_literal(h)}",
        f"w_base = (o1 * {int_literal(per_group_in)} + ci) * {int_literal(kh * kw)}",
        *_tap_loops(w, tap),
    ]
    lines = [
        f"res = {float_literal(0.0, ctype)}",
        "# the input channels of this output channel's group",
        f"c_first = (o1 // {int_literal(per_group_out)}) * {int_literal(per_group_in)}",
    ]
    if per_group_in == 1:  # depthwise (or one channel per group): no channel loop
        return [*lines, "ci = 0", *channel]
    return [*lines, f"for ci in range({int_literal(per_group_in)}):", *indent(channel, 1)]
