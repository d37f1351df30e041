"""Choosing every group's schedule for a target: the one place a decision
is made (`tile-and-promote` runs it; code generation runs it for a group
that reaches it without one). It asks each group's kind (the registry of
`analysis/group_kind.py`), so it sits in this low layer where the register
model and code generation can call it; the kinds' decisions live in
`scheduling/kinds/`. Each kind's choice is recorded as the group's
`schedule` attribute (`dialects/schedule.py`), with a readable line
(`schedule_text`) and the shared memory it uses (`shared_bytes_est`).

Each kind's `choose` (`scheduling/kinds/`) decides:

- pointwise: `scheduling/pointwise.py` (a tile for transposed operands,
  its padded shared tiles counted);
- reduction: `scheduling/reduction_schedule.py`, its shared-memory cache within the
  budget (the target's static shared memory, or the limit when smaller);
- contraction: the tile `register-budget` chose, or the size-based one, made
  smaller until its shared bytes fit the limit; a library GEMM is recorded
  as `impl = "library"`;
- attention: the tile `fuse-attention` chose (`scheduling/attention.py`), or
  the one chosen for the default target;
- layout: the pointwise schedule of the collapsed copy read as a view
  (`codegen/layout.py`), a tile when it transposes the innermost axis;
- window: a lone conv or pool the tiled plan (`scheduling/window_schedule.py`)
  shrunk until it fits the limit; conv + pool its pooled tile.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import IntegerAttr, IntegerType, StringAttr

from fusec.analysis.group_kind import ScheduleContext, group_kind, kind_name
from fusec.analysis.group_memo import planned, recorded
from fusec.analysis.remarks import RemarkCollector
from fusec.analysis.targets import Target
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import SCHEDULE_KEY, ScheduleAttr


def _int(v: int) -> IntegerAttr[IntegerType]:
    return IntegerAttr(v, IntegerType(64))


@dataclass
class Scheduler(ScheduleContext):
    """Chooses and records the schedule of each group on `target`, within
    `limit` bytes of shared memory per block; remarks say what was shrunk."""

    def schedule(self, group: GroupOp) -> None:
        """Record `schedule`, `schedule_text` and `shared_bytes_est` on `group`."""
        attr, line, used = self.choose(group)
        if attr is not None:
            group.attributes[SCHEDULE_KEY] = attr
        group.attributes["schedule_text"] = StringAttr(line)
        group.attributes["shared_bytes_est"] = _int(used)

    def choose(self, group: GroupOp) -> tuple[ScheduleAttr | None, str, int]:
        """The schedule of `group` (None for a kind without one), a readable line,
        and its shared bytes; nothing is recorded. Its kind chooses
        (`GroupKind.choose`); an unknown kind is an error at the group."""
        return group_kind(kind_name(group), group).choose(self, group)


def ensure_schedules(groups: list[GroupOp], target: Target) -> None:
    """Schedule the groups that have none (code generation of a module that
    did not run `tile-and-promote`), within the target's shared memory."""
    scheduler = Scheduler(target, target.shared_memory_per_block, RemarkCollector())
    for group in groups:
        if SCHEDULE_KEY not in group.attributes:
            attr = scheduler.choose(group)[0]
            if attr is not None:
                group.attributes[SCHEDULE_KEY] = attr


def proposed_schedule(group: GroupOp, target: Target) -> ScheduleAttr | None:
    """The schedule `group` would get on `target` (nothing recorded, no
    remarks): what the register and cost models read before
    `tile-and-promote` ran; decided once while the group stays as it is
    (`analysis/group_memo.py`)."""
    return planned("proposed_schedule", group, lambda g: decide_schedule(g, target),
                   extra=(target, recorded(group)))


def decide_schedule(group: GroupOp, target: Target) -> ScheduleAttr | None:
    """`proposed_schedule` decided afresh."""
    scheduler = Scheduler(target, target.shared_memory_per_block, RemarkCollector())
    return scheduler.choose(group)[0]
