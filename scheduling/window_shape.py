"""What a window group computes (`WindowShape`): its one window op
(`nn.conv2d`, `nn.max_pool2d`, `nn.avg_pool2d`), the operand it reads
(a group input, or computed from them by a fused prologue), and the geometry
of its taps; `analyze` checks the group is one window op with an elementwise
epilogue over its result, and says where it is not.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue

from fusec.analysis.diagnostics import op_error
from fusec.analysis.fused_prologue import fused_prologue
from fusec.analysis.group_body import POINT_KINDS, GroupBody, fits_domain
from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.dialects import nn
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import Shape, fmt

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
