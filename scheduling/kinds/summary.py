"""Legality's fast resource estimates shared by several group kinds."""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from fusec.analysis.fusion_legality import op_registers
from fusec.analysis.targets import Target


class SummaryResources:
    """`summary_registers` and `summary_shared` of a kind: `base_registers`
    plus each op's temporaries, and `shared_bytes` (per merged group when
    `shared_per_part`)."""

    base_registers: int = 0
    shared_bytes: int = 0
    shared_per_part: bool = False

    def summary_registers(self, ops: tuple[Operation, ...], inputs: frozenset[SSAValue],
                          outputs: list[SSAValue], target: Target) -> int:
        """`base_registers` plus each op's temporaries."""
        return self.base_registers + sum(map(op_registers, ops))

    def summary_shared(self, ops: tuple[Operation, ...], shape: tuple[int, ...],
                       parts: int) -> int:
        """`shared_bytes`, per merged group when `shared_per_part`."""
        return self.shared_bytes * (max(1, parts) if self.shared_per_part else 1)
