"""The attention kind: Q K^T, softmax and P V in one kernel with an online
softmax, formed whole by `fuse-attention` (never by merging two groups)."""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from fusec.analysis.diagnostics import op_error
from fusec.analysis.fusion_legality import Candidate, GroupInfo, Merged
from fusec.analysis.group_kind import LIBRARY_BACKEND, Choice, ScheduleContext, group_backend
from fusec.analysis.scheduled_cost import ScheduledKernel
from fusec.analysis.targets import Target
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import AttentionSchedule, ScheduleAttr
from fusec.scheduling.attention import attention_candidates
from fusec.scheduling.attention import choose_tile as choose_attention_tile
from fusec.scheduling.attention_group import group_registers
from fusec.scheduling.attention_group import group_shape as attention_group_shape
from fusec.scheduling.attention_schedule import recorded_tile as recorded_attention_tile
from fusec.scheduling.attention_schedule import shared_bytes as attention_shared
from fusec.scheduling.contraction_schedule import GemmTile
from fusec.scheduling.kinds.common import group_name
from fusec.scheduling.kinds.over_budget import SplitOverBudget
from fusec.scheduling.register_estimate import RegisterEstimate
from fusec.scheduling.schedule_cost import pointwise_kernel

ATTENTION_CANDIDATES = 12
"""Attention tiles offered at most (the cost model's ranking, legal ones only)."""


class AttentionKind(SplitOverBudget):
    """`kind = "attention"`. Legality never summarizes one (no single op
    has this kind), so its summary methods describe the group as a whole
    block of work that merges with nothing."""

    name = "attention"
    sized_for_budget = True
    """`fuse-attention` chose its tile within the register budget."""

    def merge(self, c: Candidate, mine: GroupInfo, other: GroupInfo) -> Merged | str | None:
        """Nothing merges into an attention group: `fuse-attention` forms it whole."""
        return (f"an attention group is formed whole by fuse-attention; it does not fuse "
                f"with a {other.kind} group")

    def summary_registers(self, ops: tuple[Operation, ...], inputs: frozenset[SSAValue],
                          outputs: list[SSAValue], target: Target) -> int:
        """No fast estimate: `registers` prices the scheduled group (0 here,
        as for any kind without a legality base)."""
        return 0

    def summary_shared(self, ops: tuple[Operation, ...], shape: tuple[int, ...],
                       parts: int) -> int:
        """No fast estimate: `choose` gives its tile's shared bytes."""
        return 0

    def kernel_path(self, info: GroupInfo) -> str:
        """Priced on the plain roofline."""
        return "roofline"

    def choose(self, ctx: ScheduleContext, group: GroupOp) -> Choice:
        """The tile fuse-attention chose (its `#fusion.attention` schedule),
        or the fastest legal one for a group written by hand; over the
        limit, a remark (the kernel's static shared memory cannot shrink
        below its tile)."""
        tile = recorded_attention_tile(group)
        shape = attention_group_shape(group)
        if tile is None:
            chosen = choose_attention_tile(shape, ctx.target)
            if isinstance(chosen, str):
                raise op_error(group, f"cannot generate this attention group: {chosen}")
            tile = chosen
        used = attention_shared(tile, shape.d, shape.dv)
        if used > ctx.limit:
            ctx.remarks.add("missed", f"group {group_name(group)}: attention tile "
                            f"{tile.text()} needs {used} bytes of shared memory, over the "
                            f"limit of {ctx.limit}")
        return (tile.attr(), f"attention: {tile.text()}, Q/K/V/P tiles in shared memory, "
                "online softmax", used)

    def priced_by_schedule(self, info: GroupInfo) -> bool:
        """No: fuse-attention prices its tile itself."""
        return False

    def scheduled_kernel(self, ctx: ScheduleContext, group: GroupOp,
                         attr: ScheduleAttr | None) -> ScheduledKernel:
        """One thread per output on the plain roofline (fuse-attention
        prices the tile itself; legality never merges into one)."""
        return pointwise_kernel(group, None, "roofline")

    def candidates(self, group: GroupOp, first: ScheduleAttr, target: Target,
                   limit: int) -> list[ScheduleAttr]:
        """The legal tiles in the cost model's order, the fastest of each
        kind first (`scheduling/attention.candidate_order`), the order the
        autotuner times them in."""
        if not isinstance(first, AttentionSchedule):
            return []
        return list(attention_candidates(group, target, ATTENTION_CANDIDATES, limit))

    def registers(self, group: GroupOp, target: Target,
                  tile: GemmTile | None = None) -> RegisterEstimate:
        """`scheduling/attention_group.group_registers`; none for a cuDNN
        call (`backend = "library"`), which has no kernel of fusec's."""
        if group_backend(group) == LIBRARY_BACKEND:
            return RegisterEstimate(0, ())
        return group_registers(group, target)
