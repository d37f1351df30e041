"""Registers of a pointwise kernel from its ops alone: the part of the
register model that fusion legality needs before a group (or its schedule)
exists. `scheduling/register_model.py` builds its pointwise estimate from the
same constants, so the two cannot drift apart."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xdsl.ir import Operation, OpResult, SSAValue

from fusec.analysis.view_operands import extra_reads
from fusec.dialects import nn
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import numel

# One table, fitted 2026-12-01 against `ptxas -arch=sm_90 -v` (CUDA 13,
# numba-cuda PTX) on the pointwise kernels of the current generator
# (`codegen/pointwise.py`: uint32 indices by literal divisors, wide half
# words) from 100 random programs of the fuzzer's generator (`fuzz/generate.py`,
# `GenConfig(max_ops=8, max_dim=12)`, seeds 100-199) and examples/ and
# bench/programs/ (117 of 125 kernels within +-25%), and the kernels of the
# code generation tests (tests/test_register_budget.py: all within 25% or 4
# registers; the half-word term, 2 on the random programs alone, is 3 for
# f16 gelu with two outputs: ptxas 30). Held-out corpus (tests/register_corpus):
# 43 of 44 pointwise kernels within +-25%. Off: tiny kernels whose count ptxas
# sets by scheduling alone (6 to 18 registers for the same one-op kernel)
# and a half kernel of 8 strided elements per thread (estimate 66, ptxas 32).
POINTWISE_BASE = 8  # thread index, chunk base, bounds
POINTWISE_ARRAY_REGISTERS_PER_ELEMENT = 1.0  # a value (or word) in flight, per access
POINTWISE_TAIL_REGISTERS = 3  # per further access of a partial chunk: clamp and flag
POINTWISE_HALF_REGISTERS = 1  # unpacking the arrays moved in words (no alignment test since
# the runtime aligns every array: 3 with it)
POINTWISE_SCALAR_REGISTERS = 1  # a one-element input, loaded once
POINTWISE_MATH_REGISTERS = 4  # a libdevice-style sequence (pow, div, erf, ...), one at a time
POINTWISE_SCALAR_KERNEL = 8  # every output has one element: no chunk, no bounds
POINTWISE_PARAM_REGISTERS = 1  # per parameter of a one-element kernel
PARAM_REGISTERS = 2  # a data pointer (64-bit): the other kernels' models (attention, transposed)
POINTWISE_LIVE_REGISTERS = 1.0
"""Per intermediate value live at the widest point of the op order (wide_tanh
as one group: widest point 31 values, ptxas 56, estimate 63)."""

MATH_OPS: tuple[type[Operation], ...] = (
    nn.PowOp, nn.DivOp, nn.ReciprocalOp, nn.SigmoidOp, nn.SiluOp, nn.GeluOp, nn.ErfOp,
    nn.TanhOp, nn.SinOp, nn.CosOp)
"""Ops that expand to a call-like sequence with temporaries of their own
(exp, log, sqrt and rsqrt are single MUFU instructions and cost nothing extra)."""

SINGLE_INSTRUCTION_MATH: tuple[type[Operation], ...] = (
    nn.ExpOp, nn.LogOp, nn.SqrtOp, nn.RsqrtOp)
"""The math functions that are single MUFU instructions: every op whose kernel
expression calls a math function is in `MATH_OPS` or here (tests/test_op_tables.py)."""


def pointwise_registers_of(ops: Sequence[Operation], inputs: Iterable[SSAValue],
                           outputs: Iterable[SSAValue], elements_per_thread: int) -> int:
    """Registers of a pointwise kernel of `ops` (program order) before it
    exists as a group: `elements_per_thread` accesses of one element, whole
    chunks (no wide words, no partial chunk: a kernel large enough to matter)."""
    return round(sum(v for _, v in pointwise_register_parts(
        ops, list(inputs), list(outputs), elements_per_thread)))


def pointwise_register_parts(ops: Sequence[Operation], inputs: Sequence[SSAValue],
                             outputs: Sequence[SSAValue], accesses: int, lanes: int = 1,
                             wide: int = 0, tail: bool = False) -> list[tuple[str, float]]:
    """`pointwise_registers_of` term by term (the register model's
    breakdown): `accesses` per thread and array, of `lanes` elements each for
    the `wide` half arrays moved in words (a word of `lanes` halves is
    `lanes / 2` registers); `tail` when the last chunk is partial."""
    arrays = [v for v in (*inputs, *outputs) if v in outputs or numel(tensor_shape(v)) != 1]
    scalars = len(inputs) - sum(1 for v in inputs if v in arrays)
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
    math = POINTWISE_MATH_REGISTERS if any(isinstance(op, MATH_OPS) for op in ops) else 0
    intermediates = ("live intermediates", POINTWISE_LIVE_REGISTERS * widest)
    if outputs and all(numel(tensor_shape(v)) == 1 for v in outputs):
        return [("one element", POINTWISE_SCALAR_KERNEL),
                ("parameters", POINTWISE_PARAM_REGISTERS * (len(arrays) + scalars)),
                ("math", math), intermediates]
    # an input read through several views (slices of one buffer) holds one
    # array in flight per view
    words = len(arrays) - wide + wide * lanes / 2 + extra_reads(ops, inputs)
    return [("base", POINTWISE_BASE),
            ("arrays in flight", POINTWISE_ARRAY_REGISTERS_PER_ELEMENT * accesses * words),
            ("partial chunk", POINTWISE_TAIL_REGISTERS * (accesses - 1) if tail else 0),
            ("half words", POINTWISE_HALF_REGISTERS if wide else 0),
            ("scalars", POINTWISE_SCALAR_REGISTERS * scalars),
            ("math", math), intermediates]
