"""Every `nn` op has an entry in each per-op table it needs: an op missing
from `analysis/op_kinds.py` would silently become opaque (never fused), one
missing from the reference interpreter could not be folded or checked."""

from __future__ import annotations

from collections.abc import Container

from xdsl.ir import Operation

from fusec.analysis.op_kinds import _KINDS, OpKind  # pyright: ignore[reportPrivateUsage]
from fusec.dialects.nn import NN
from fusec.reference.ops import OP_FUNCTIONS

TABLES: dict[str, Container[type[Operation]]] = {
    "analysis/op_kinds.py (_KINDS)": _KINDS,
    "reference/ops.py (OP_FUNCTIONS)": OP_FUNCTIONS,
}


def missing(table: Container[type[Operation]], ops: list[type[Operation]]) -> list[str]:
    """The names of `ops` that have no entry in `table`."""
    return [op.name for op in ops if op not in table]


def test_every_nn_op_is_in_every_table() -> None:
    ops = list(NN.operations)
    assert len(ops) > 40
    gaps = {where: names for where, table in TABLES.items() if (names := missing(table, ops))}
    assert not gaps, f"nn ops without an entry: {gaps}"


def test_no_nn_op_is_opaque() -> None:
    assert [op.name for op in NN.operations if _KINDS[op] is OpKind.OPAQUE] == []


def test_an_op_left_out_of_a_table_is_named() -> None:
    ops = list(NN.operations)
    partial = {op: _KINDS[op] for op in ops if op.name != "nn.gelu"}
    assert missing(partial, ops) == ["nn.gelu"]
