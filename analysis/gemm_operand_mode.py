"""How a GEMM operand is read (`operand_mode`): straight from a group input,
through a transpose of one (its last two axes swapped), or computed by a
prologue. The register model and the operand tiles
(`codegen/gemm_operands.py`) both ask.
"""

from __future__ import annotations

from typing import Literal

from xdsl.ir import BlockArgument, SSAValue

from fusec.dialects import nn
from fusec.dialects.nn_base import tensor_shape

Mode = Literal["direct", "transposed", "computed"]


def operand_mode(value: SSAValue) -> tuple[Mode, SSAValue]:
    """How an operand is read, and the value actually loaded."""
    if isinstance(value, BlockArgument):
        return "direct", value
    op = value.owner
    rank = len(tensor_shape(value))
    swap = [*range(rank - 2), rank - 1, rank - 2]
    if isinstance(op, nn.TransposeOp) and op.perm == swap and isinstance(
        op.operands[0], BlockArgument
    ):
        return "transposed", op.operands[0]
    return "computed", value
