"""Every `nn` op has an entry in each per-op table it needs: an op missing
from `analysis/op_kinds.py` would silently become opaque (never fused), one
missing from the reference interpreter could not be folded or checked, an
elementwise op without a kernel expression could not be compiled, a math
function missing from the cost tables would be priced as one instruction, an
op the fuzzer cannot build would never be fuzzed, and one missing from
docs/nn-dialect.md would be undocumented. docs/adding-an-op.md lists them all.
"""

from __future__ import annotations

import re
from collections.abc import Container
from pathlib import Path

import pytest
from xdsl.ir import Operation

from fusec.analysis.cost_model import ELEMENTWISE_FLOPS
from fusec.analysis.fusion_legality import TRANSCENDENTAL
from fusec.analysis.op_kinds import _KINDS, OpKind  # pyright: ignore[reportPrivateUsage]
from fusec.analysis.pointwise_registers import MATH_OPS, SINGLE_INSTRUCTION_MATH
from fusec.codegen.kernel_source import (
    _BINARY,  # pyright: ignore[reportPrivateUsage]
    _UNARY,  # pyright: ignore[reportPrivateUsage]
    SCALAR_OPS,
)
from fusec.dialects.nn import NN
from fusec.fuzz.ops import OPS
from fusec.reference.ops import OP_FUNCTIONS

ROOT = Path(__file__).resolve().parent.parent

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


def test_every_elementwise_op_has_a_kernel_expression() -> None:
    elementwise = [op for op in NN.operations if _KINDS[op] is OpKind.ELEMENTWISE]
    assert missing(SCALAR_OPS, elementwise) == []


def _calls_math(template: str) -> bool:
    """A kernel expression template that calls a math function (`ieee_tanh`,
    the exp of `{exp}`), not just arithmetic."""
    return "ieee_" in template or "{exp}" in template


MATH_CALLING = sorted((op for op, template in {**_UNARY, **_BINARY}.items()
                       if _calls_math(template)), key=lambda op: op.name)


def test_the_math_calling_ops_are_found() -> None:
    names = {op.name for op in MATH_CALLING}
    assert {"nn.exp", "nn.tanh", "nn.pow", "nn.sigmoid"} <= names
    assert "nn.add" not in names and "nn.neg" not in names


@pytest.mark.parametrize("op", MATH_CALLING, ids=lambda op: op.name)
def test_every_math_function_is_priced(op: type[Operation]) -> None:
    """Flops beyond one instruction (cost model), the registers of a
    transcendental (fusion legality), and a math sequence's temporaries or a
    single MUFU instruction (the pointwise register model)."""
    assert ELEMENTWISE_FLOPS.get(op, 1) > 1, "analysis/cost_model.py ELEMENTWISE_FLOPS"
    assert op in TRANSCENDENTAL, "analysis/fusion_legality.py TRANSCENDENTAL"
    assert op in MATH_OPS or op in SINGLE_INSTRUCTION_MATH, \
        "analysis/pointwise_registers.py MATH_OPS or SINGLE_INSTRUCTION_MATH"


def test_the_fuzzer_builds_every_op() -> None:
    built = {name for name, _ in OPS}
    assert [op.name for op in NN.operations if op.name not in built] == []


def test_every_op_is_documented() -> None:
    text = (ROOT / "docs" / "nn-dialect.md").read_text(encoding="utf-8")
    assert [op.name for op in NN.operations
            if not re.search(re.escape(op.name) + r"(?![\w])", text)] == []


def test_the_torch_peer_runs_every_op() -> None:
    """bench/torch_peer.py: the same program op by op in PyTorch."""
    pytest.importorskip("torch")
    from fusec.bench.torch_peer import STEPS

    assert missing(STEPS, list(NN.operations)) == []
