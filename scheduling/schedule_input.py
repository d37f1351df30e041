"""How an emitter gets its decisions: the group's schedule attribute, read
verbatim (`dialects/schedule.py`). An emitter has no defaults and no target
lookups of its own; a group without the schedule its kind needs is an error
that names the pass that records it."""

from __future__ import annotations

from typing import TypeVar

from fusec.analysis.diagnostics import op_error
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import SCHEDULE_KEY, ScheduleAttr

S = TypeVar("S", bound=ScheduleAttr)


def group_schedule(group: GroupOp, cls: type[S]) -> S:
    """The `schedule` of `group`, which must be a `cls`; a located error otherwise."""
    attr = group.attributes.get(SCHEDULE_KEY)
    if isinstance(attr, cls):
        return attr
    found = "none" if attr is None else f"#{getattr(attr, 'name', type(attr).__name__)}"
    raise op_error(group, f"fusion.group needs a #{cls.name} schedule (found {found}); "
                   "run 'tile-and-promote' before code generation")
