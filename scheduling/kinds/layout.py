"""The layout kind: a transpose, slice, concat or gather left as its own
kernel, an index-remapping copy (or the tiled transpose) on the pointwise
schedule of its collapsed copy (`scheduling/layout_collapse.py`)."""

from __future__ import annotations

from fusec.analysis.fusion_legality import (
    Candidate,
    GroupInfo,
    Merged,
    indexed_read,
)
from fusec.analysis.group_kind import Choice, ScheduleContext
from fusec.analysis.scheduled_cost import ScheduledKernel
from fusec.analysis.targets import Target
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import ScheduleAttr
from fusec.scheduling.contraction_schedule import GemmTile
from fusec.scheduling.kinds.over_budget import SplitOverBudget
from fusec.scheduling.kinds.pointwise import PointwiseKind
from fusec.scheduling.kinds.summary import SummaryResources
from fusec.scheduling.layout_collapse import collapsed
from fusec.scheduling.register_estimate import RegisterEstimate
from fusec.scheduling.register_model import layout_estimate
from fusec.scheduling.schedule_cost import pointwise_kernel


class LayoutKind(SplitOverBudget, SummaryResources):
    """`kind = "layout"`."""

    name = "layout"

    def merge(self, c: Candidate, mine: GroupInfo, other: GroupInfo) -> Merged | str | None:
        """Only as a concat or gather its reader reads in place."""
        return indexed_read(c)

    def kernel_path(self, info: GroupInfo) -> str:
        """Priced on the plain roofline."""
        return "roofline"

    def choose(self, ctx: ScheduleContext, group: GroupOp) -> Choice:
        """The pointwise kind's schedule of the collapsed copy read as a view
        (`scheduling/layout_collapse.py`): a tile when it transposes the innermost axis."""
        attr, line, used = PointwiseKind().choose(ctx, collapsed(group))
        return attr, "layout: index remapping copy, " + line.removeprefix("pointwise: "), used

    def priced_by_schedule(self, info: GroupInfo) -> bool:
        """No: a copy, priced on the plain roofline either way."""
        return False

    def scheduled_kernel(self, ctx: ScheduleContext, group: GroupOp,
                         attr: ScheduleAttr | None) -> ScheduledKernel:
        """The collapsed copy's pointwise threads, on the plain roofline."""
        return pointwise_kernel(group, attr, "roofline")

    def candidates(self, group: GroupOp, first: ScheduleAttr, target: Target,
                   limit: int) -> list[ScheduleAttr]:
        """None: a layout copy has no schedule to vary."""
        return []

    def registers(self, group: GroupOp, target: Target,
                  tile: GemmTile | None = None) -> RegisterEstimate:
        """`register_model.layout_estimate`, under its schedule."""
        return layout_estimate(group, target)
