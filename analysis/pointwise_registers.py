"""Registers of a pointwise kernel from its ops alone: the part of the
register model that fusion legality needs before a group (or its schedule)
exists. `codegen/register_model.py` builds its pointwise estimate from the
same constants, so the two cannot drift apart."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation, OpResult, SSAValue

from fusec.analysis.view_operands import extra_reads
from fusec.dialects.element_types import BY_NAME
from fusec.dialects.nn_base import element_type_name, tensor_shape
from fusec.dialects.shapes import numel

POINTWISE_BASE = 8  # thread index, chunk loop, bounds
PARAM_REGISTERS = 2  # per array parameter: its data pointer (64-bit)
POINTWISE_ARRAY_REGISTERS_PER_ELEMENT = 1.0
"""A value in flight plus its share of the address (fitted on ptxas sm_90
after indices became unsigned 32-bit: f32 chain16 19 registers, per-channel
scale/shift 28, two-output broadcast 30, a 64-element broadcast copy 8). A
half moved 4 to an 8-byte word counts half of this."""
POINTWISE_HALF_REGISTERS = 6
"""A kernel that moves halves wide: the alignment test, and values unpacked
from and packed into words (ptxas: f16 chain16 23, scale/shift 31)."""

POINTWISE_LIVE_REGISTERS = 0.25
"""Registers per intermediate value live at the widest point of the op
order: ptxas evaluates a thread's elements one after another once their
loads are issued and recomputes cheap values from the loaded inputs, so
intermediates cost less than a register per element. Fitted on one
program only (bench/programs/wide_tanh.mlir as one group: widest point 31
values, ptxas 56 registers, estimate 56)."""


def pointwise_registers_of(ops: Sequence[Operation], inputs: Iterable[SSAValue],
                           outputs: Iterable[SSAValue], elements_per_thread: int) -> int:
    """Registers of a pointwise kernel of `ops` (program order) before it
    exists as a group: base, arrays in flight and scalars, plus the
    intermediates live at the widest point of the op order."""
    return round(sum(v for _, v in pointwise_register_parts(
        ops, list(inputs), list(outputs), elements_per_thread)))


def pointwise_register_parts(ops: Sequence[Operation], inputs: Sequence[SSAValue],
                             outputs: Sequence[SSAValue], elements_per_thread: int,
                             ) -> list[tuple[str, float]]:
    """`pointwise_registers_of` term by term (the register model's breakdown)."""
    arrays = [v for v in (*inputs, *outputs) if v in outputs or numel(tensor_shape(v)) != 1]
    scalars = len(inputs) - sum(1 for v in inputs if v in arrays)
    halves = [v for v in arrays if _is_half(v)]
    in_flight = POINTWISE_ARRAY_REGISTERS_PER_ELEMENT * elements_per_thread * (
        len(arrays) - len(halves) / 2  # a half moved in a word is half a register
        + extra_reads(ops, inputs))  # an input read through several views
    last_use: dict[SSAValue, int] = {}
    for k, op in enumerate(ops):
        for v in op.operands:
            last_use[v] = k
    live = widest = 0
    for k, op in enumerate(ops):
        live -= sum(1 for v in set(op.operands) if last_use.get(v) == k
                    and isinstance(v, OpResult) and v.op in ops and v not in outputs)
        live += sum(1 for r in op.results if r in last_use and r not in outputs)
        widest = max(widest, live)
    return [("base", POINTWISE_BASE), ("arrays in flight", in_flight),
            ("half words", POINTWISE_HALF_REGISTERS if halves else 0),
            ("scalars", PARAM_REGISTERS * scalars),
            ("live intermediates", POINTWISE_LIVE_REGISTERS * widest)]


def _is_half(value: SSAValue) -> bool:
    t = value.type
    if not isinstance(t, TensorType):
        return False
    row = BY_NAME.get(element_type_name(t.element_type))
    return row is not None and row.is_half
