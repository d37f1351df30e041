"""The prologue of a fused op: the ops inside a group that compute a matmul's
(or window op's) operands from group inputs, which the kernel evaluates per
loaded element (`codegen/operand_reader.py` writes that read). Which ops
may form one, and that they feed nothing else, is a fact about the group
that the GEMM shape (`scheduling/gemm_shape.py`) and the writers share.
"""

from __future__ import annotations

from xdsl.ir import BlockArgument, Operation, SSAValue

from fusec.analysis.diagnostics import op_error
from fusec.analysis.group_body import POINT_KINDS
from fusec.analysis.op_kinds import op_kind
from fusec.dialects import nn

# Layout ops a read sees through: they only change which element is read.
VIEW_OPS = (nn.TransposeOp, nn.SliceOp, nn.ReshapeOp)


def prologue_ops(value: SSAValue) -> list[Operation]:
    """The ops computing `value` inside the group (its backward slice)."""
    seen: list[Operation] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, BlockArgument):
            continue
        op = v.owner
        assert isinstance(op, Operation)
        if op not in seen:
            seen.append(op)
            stack.extend(op.operands)
    return seen


def check_prologue(value: SSAValue, consumer: Operation) -> None:
    """Raise a located error unless `value` is computed only by ops `read_at`
    understands."""
    for op in prologue_ops(value):
        ok = isinstance(op, (*VIEW_OPS, nn.ConstantOp)) or op_kind(op) in POINT_KINDS
        if not ok:
            raise op_error(op, f"{op.name} cannot be fused as a prologue of {consumer.name}")


def fused_prologue(consumer: Operation) -> set[Operation]:
    """The ops computing `consumer`'s operands inside the group, checked:
    only ops `read_at` understands, feeding nothing but `consumer`."""
    prologue: set[Operation] = set()
    for operand in consumer.operands:
        check_prologue(operand, consumer)
        prologue.update(prologue_ops(operand))
    for op in prologue:
        for r in op.results:
            if any(u.operation not in prologue and u.operation is not consumer for u in r.uses):
                raise op_error(op, f"{op.name} feeds {consumer.name} and other ops; it cannot "
                               f"be fused as a prologue of {consumer.name}")
    return prologue
