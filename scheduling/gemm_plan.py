"""The plan of a contraction group fusec writes itself (`GemmPlan`): the
GEMM the group computes (`scheduling/gemm_shape.py`: the matmul, its
operands, the batch, M, N, K and the fused epilogue) and the tile its
recorded `#fusion.contraction` schedule names (`contraction_schedule.tile_of`).
The contraction writer (`codegen/contraction.py`) reads both and decides
nothing else."""

from __future__ import annotations

from dataclasses import dataclass

from fusec.analysis.targets import Target
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import ContractionSchedule
from fusec.scheduling.contraction_schedule import GemmTile, tile_of
from fusec.scheduling.gemm_shape import GemmShape, analyze_group
from fusec.scheduling.schedule_input import group_schedule


@dataclass(frozen=True)
class GemmPlan:
    """Every decision behind one contraction group's kernel."""

    shape: GemmShape
    tile: GemmTile


def plan_gemm(group: GroupOp, body: GroupOp, _target: Target) -> GemmPlan:
    """The plan of contraction `group`, whose (decomposed) body is `body`,
    under its recorded schedule."""
    return GemmPlan(analyze_group(body), tile_of(group_schedule(group, ContractionSchedule)))
