"""Registers of a pointwise kernel from its ops alone: the part of the
register model that fusion legality needs before a group (or its schedule)
exists. `codegen/register_model.py` builds its pointwise estimate from the
same constants, so the two cannot drift apart."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xdsl.ir import Operation, OpResult, SSAValue

from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import numel

# Fitted 2026-12-01 against `ptxas -arch=sm_90 -v` (CUDA 12, numba-cuda
# 0.30 PTX) on the pointwise kernels of 100 random programs of the fuzzer's
# generator (`fuzz/generate.py`, `GenConfig(max_ops=8, max_dim=12)`, seeds
# 100-199: 137 kernels) and of examples/ and bench/programs/: 133 of 140
# within +-25% (the previous base 13 + 1.625 per element in flight: 99).
# Checked on the held-out corpus of tests/test_register_corpus.py. ptxas
# gives any kernel with a loop about 31 registers, whatever it holds, so the
# estimate is the larger of that floor and the elements in flight:
POINTWISE_FLOOR = 31  # thread index, grid-stride loop, bounds, a few addresses
POINTWISE_FLOOR_PER_OP = 1  # each op past the first adds a temporary ...
POINTWISE_FLOOR_OPS = 6  # ... up to this many ops; later ones reuse registers
POINTWISE_LINE_BASE = 4  # past the floor: thread index and bounds beside the values in flight
POINTWISE_ARRAY_REGISTERS_PER_ELEMENT = 1.625  # a value in flight plus its share of the address
POINTWISE_COORD_REGISTERS = 1  # per element and non-power-of-two dimension unravelled
POINTWISE_SCALAR_KERNEL = 8  # a one-element output: no loop, no bounds
PARAM_REGISTERS = 2  # per parameter of a one-element kernel: its data pointer (64-bit)

POINTWISE_LIVE_REGISTERS = 0.25
"""Registers per intermediate value live at the widest point of the op
order, added before a group exists (fusion legality): ptxas evaluates a
thread's elements one after another once their loads are issued and
recomputes cheap values from the loaded inputs, so intermediates cost far
less than a register per element. Fitted on one program only
(bench/programs/wide_tanh.mlir as one group)."""


def pointwise_parts(unroll: int, arrays: int, scalars: int, coords: int, ops: int,
                    one_element: bool) -> tuple[tuple[str, float], ...]:
    """The parts of a pointwise kernel's estimate: `unroll` elements per
    thread of `arrays` arrays read or written, `scalars` one-element inputs,
    `coords` unravelled non-power-of-two dimensions per element, `ops` ops;
    `one_element` when every output has one element."""
    if one_element:
        return (("one element", POINTWISE_SCALAR_KERNEL),
                ("pointers", PARAM_REGISTERS * (arrays + scalars)))
    floor = POINTWISE_FLOOR + POINTWISE_FLOOR_PER_OP * min(max(0, ops - 1), POINTWISE_FLOOR_OPS)
    flight = POINTWISE_ARRAY_REGISTERS_PER_ELEMENT * unroll * arrays
    coordinates = POINTWISE_COORD_REGISTERS * unroll * coords
    if floor >= POINTWISE_LINE_BASE + flight + coordinates:
        return (("base", POINTWISE_FLOOR), ("ops", floor - POINTWISE_FLOOR))
    return (("base", POINTWISE_LINE_BASE), ("arrays in flight", flight),
            ("coordinates", coordinates))


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
    one = bool(written) and all(numel(tensor_shape(v)) == 1 for v in written)
    computing = sum(1 for op in ops if op.name != "nn.constant")
    parts = pointwise_parts(elements_per_thread, arrays, scalars, 0, computing, one)
    return round(sum(v for _, v in parts) + POINTWISE_LIVE_REGISTERS * widest)
