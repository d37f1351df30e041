"""The matmul of a contraction group and its epilogue domain (`analyze`):
what the GEMM tile is chosen for (`scheduling/kinds/contraction.py`), what
the cost and register models read, and what the GEMM writer
(`codegen/contraction.py`, whose docstring tells the kernel) renders.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import SSAValue

from fusec.analysis.diagnostics import op_error
from fusec.analysis.fused_prologue import fused_prologue
from fusec.analysis.group_body import POINT_KINDS, GroupBody, fits_domain
from fusec.analysis.group_memo import planned
from fusec.analysis.op_kinds import op_kind
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import Shape, fmt


@dataclass
class GemmShape:
    """The matmul of a contraction group and its epilogue domain."""

    body: GroupBody
    matmul: nn.MatmulOp
    a: SSAValue  # a group input, or a value its prologue computes (`operand_reader`)
    b: SSAValue
    out: Shape  # (*batch, M, N)

    @property
    def batch(self) -> Shape:
        return self.out[:-2]

    @property
    def m(self) -> int:
        return self.out[-2]

    @property
    def n(self) -> int:
        return self.out[-1]

    @property
    def k(self) -> int:
        return tensor_shape(self.a)[-1]


def analyze(body: GroupBody) -> GemmShape:
    """Check that the group is one matmul (operands from group inputs,
    optionally through a prologue of elementwise ops and transposes) plus an
    elementwise epilogue over its result shape; raise a located error if not."""
    mms = [op for op in body.ops if isinstance(op, nn.MatmulOp)]
    if len(mms) != 1:
        raise op_error(
            body.group, f"a contraction group must hold exactly one nn.matmul, found {len(mms)}"
        )
    mm = mms[0]
    a, b = mm.operands
    prologue = fused_prologue(mm)
    out = mm.result_shape
    for op in body.ops:
        if op is mm or op in prologue or isinstance(op, nn.ConstantOp):
            continue
        if op_kind(op) not in POINT_KINDS:
            raise op_error(op, f"{op.name} cannot be fused into a matmul epilogue")
        if not fits_domain(tensor_shape(op.results[0]), out):
            raise op_error(
                op, f"{op.name} has shape {fmt(tensor_shape(op.results[0]))}, which does not "
                f"broadcast to the matmul result {fmt(out)}",
            )
    for v in body.outputs:
        if not fits_domain(tensor_shape(v), out):
            raise op_error(body.group, f"group output of shape {fmt(tensor_shape(v))} does not "
                           f"broadcast to the matmul result {fmt(out)}")
    return GemmShape(body, mm, a, b, out)


def analyze_group(group: GroupOp) -> GemmShape:
    """`analyze` of `group`'s body, once while the group is unchanged: the
    contraction kind, the register model, the cost model and the writer read
    one shape (`group_memo`)."""
    return planned("gemm", group, lambda g: analyze(GroupBody.of(g)))
