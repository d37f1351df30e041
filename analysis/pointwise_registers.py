"""Registers of a pointwise kernel from its ops alone: the part of the
register model that fusion legality needs before a group (or its schedule)
exists. `codegen/register_model.py` builds its pointwise estimate from the
same constants, so the two cannot drift apart."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xdsl.ir import Operation, OpResult, SSAValue

from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import numel

POINTWISE_BASE = 13  # thread index, chunk loop, bounds
PARAM_REGISTERS = 2  # per array parameter: its data pointer (64-bit)
POINTWISE_ARRAY_REGISTERS_PER_ELEMENT = 1.625  # a value in flight plus its share of the address

POINTWISE_LIVE_REGISTERS = 0.25
"""Registers per intermediate value live at the widest point of the op
order: ptxas evaluates a thread's elements one after another once their
loads are issued and recomputes cheap values from the loaded inputs, so
intermediates cost far less than a register per element. Fitted on one
program only (bench/programs/wide_tanh.mlir as one group: widest point 31
values, ptxas 48 registers, estimate 53)."""


def pointwise_registers_of(ops: Sequence[Operation], inputs: Iterable[SSAValue],
                           outputs: Iterable[SSAValue], elements_per_thread: int) -> int:
    """Registers of a pointwise kernel of `ops` (program order) before it
    exists as a group: `_pointwise`'s base, arrays in flight and scalars, plus
    the intermediates live at the widest point of the op order."""
    arrays = sum(1 for v in inputs if numel(tensor_shape(v)) != 1)
    scalars = sum(1 for v in inputs if numel(tensor_shape(v)) == 1)
    written = list(outputs)
    arrays += len(written)
    last_use: dict[SSAValue, int] = {}
    for k, op in enumerate(ops):
        for v in op.operands:
            last_use[v] = k
    live = widest = 0
    for k, op in enumerate(ops):
        live -= sum(1 for v in set(op.operands) if last_use.get(v) == k
                    and isinstance(v, OpResult) and v.op in ops and v not in written)
        live += sum(1 for r in op.results if r in last_use and r not in written)
        widest = max(widest, live)
    return round(POINTWISE_BASE + POINTWISE_ARRAY_REGISTERS_PER_ELEMENT
                 * elements_per_thread * arrays + PARAM_REGISTERS * scalars
                 + POINTWISE_LIVE_REGISTERS * widest)
