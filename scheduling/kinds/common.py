"""Helpers the built-in group kinds share: a group's name, its ops and
results, the integer attribute and the GEMM tile's readable form."""

from __future__ import annotations

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation, SSAValue

from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.scheduling.contraction_schedule import GemmTile


def group_name(group: GroupOp) -> str:
    """The group's `name` attribute ("?" without one), for remarks."""
    attr = group.attributes.get("name")
    return attr.data if isinstance(attr, StringAttr) else "?"


def body_ops(group: GroupOp) -> list[Operation]:
    """The ops of `group`'s body, its terminator left out."""
    return [op for op in group.block.ops if not isinstance(op, YieldOp)]


def body_results(group: GroupOp) -> list[SSAValue]:
    """The values `group`'s body yields."""
    last = group.block.last_op
    return list(last.operands) if isinstance(last, YieldOp) else []


def tile_text(t: GemmTile) -> str:
    """`128x128x8 (8x8 per thread)`."""
    return f"{t.bm}x{t.bn}x{t.bk} ({t.tm}x{t.tn} per thread)"
