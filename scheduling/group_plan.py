"""One plan per group: every decision a writer needs, made here, once, and
handed to the writer whole.

`tile-and-promote` records a group's schedule (`dialects/schedule.py`) in
the IR; that attribute is the plan's stored form, the one plan.json and the
report print. What a writer needs besides the schedule (the row analysis of
a reduction, the shape of a GEMM, the index plan of its rows, which
statistics share a pass) is derived from the group and its schedule by the
kind's *detail planner*, registered in `DETAIL_PLANNERS`. A writer gets the
finished `GroupPlan` (`codegen/writers.WriteTask.plan`) and reads it; it
never runs a planner itself.

```python
with group_plan(group, target) as plan:   # the planners run here
    kernel = writer_for(group).write(WriteTask(plan, name, ...))
```

A reduction, contraction, attention or window group that holds composite
ops (nn.softmax kept whole by a contract) is planned and written as its
decomposed copy (`analysis/decompose_group.py`, `DECOMPOSED`): `plan.body`
is that copy, alive until the `with` block ends; `plan.group` is the group
of the IR, whose attributes and locations the writer reports. A kind
without a detail planner (a kind a plugin added, a library call) has
`detail = None`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from xdsl.dialects.builtin import IntegerAttr, StringAttr

from fusec.analysis.decompose_group import decomposed
from fusec.analysis.diagnostics import InternalError
from fusec.analysis.group_kind import (
    LIBRARY_BACKEND,
    MAX_REGISTERS_ATTR,
    NUMBA_BACKEND,
    group_backend,
    kind_name,
)
from fusec.analysis.targets import Target
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import SCHEDULE_KEY, ScheduleAttr
from fusec.scheduling.attention_library import plan_library_attention
from fusec.scheduling.attention_plan import plan_attention
from fusec.scheduling.gemm_plan import plan_gemm
from fusec.scheduling.pointwise_group_plan import plan_layout, plan_pointwise
from fusec.scheduling.row_plan import plan_rows
from fusec.scheduling.window_group_plan import plan_window

D = TypeVar("D")

DetailPlanner = Callable[[GroupOp, GroupOp, Target], object]
"""A kind's detail planner: (group of the IR, the body to write, target) ->
the kind's plan (`RowPlan`, `GemmPlan`, ...). Bad input is an `op_error`."""

DETAIL_PLANNERS: dict[tuple[str, str], DetailPlanner] = {
    (NUMBA_BACKEND, "reduction"): plan_rows,
    (NUMBA_BACKEND, "contraction"): plan_gemm,
    (NUMBA_BACKEND, "attention"): plan_attention,
    (NUMBA_BACKEND, "window"): plan_window,
    (NUMBA_BACKEND, "pointwise"): plan_pointwise,
    (NUMBA_BACKEND, "layout"): plan_layout,
    (LIBRARY_BACKEND, "attention"): plan_library_attention,
}
"""The detail planner of each (backend, kind) that has one."""

DECOMPOSED = frozenset({(NUMBA_BACKEND, "reduction"), (NUMBA_BACKEND, "contraction"),
                        (NUMBA_BACKEND, "attention"), (NUMBA_BACKEND, "window"),
                        (LIBRARY_BACKEND, "attention")})
"""The (backend, kind) pairs whose writers write the group with its composite
ops expanded (`analysis/decompose_group.py`); the pointwise writers take a
composite elementwise op (a batch norm in inference) as it is, and library
calls read the group itself."""


@dataclass(frozen=True)
class GroupPlan:
    """Everything decided for one group: what runs it and how."""

    group: GroupOp
    """The group of the IR (its attributes, its location for errors)."""
    body: GroupOp
    """The group the writer writes: `group`, or its decomposed copy."""
    name: str
    """The group's `name` (`g3`), plan.json's `group`."""
    kind: str
    backend: str
    """Which backend runs it (`analysis/group_kind.group_backend`)."""
    schedule: ScheduleAttr | None
    """The schedule `tile-and-promote` recorded (None for a kind without one)."""
    shared_bytes: int
    """The shared memory the schedule uses per block (its estimate)."""
    registers: int
    """The registers per thread `register-budget` estimated (0: not run)."""
    max_registers: int
    """The register cap `--max-registers` asked for (0: none)."""
    detail: object | None
    """The kind's detail plan (`DETAIL_PLANNERS`), None for a kind without one."""

    def stored(self) -> dict[str, Any]:
        """The plan as plan.json records it beside the group's launches: its
        kind, backend and schedule fields (the schedule attribute of the IR)."""
        return {"kind": self.kind, "backend": self.backend,
                "schedule": None if self.schedule is None else self.schedule.as_dict()}

    def detail_of(self, cls: type[D]) -> D:
        """The detail plan, which must be a `cls` (else an internal error: the
        writer of one kind was handed the plan of another)."""
        if not isinstance(self.detail, cls):
            raise InternalError(f"group {self.name or '?'} ({self.backend}/{self.kind}) has no "
                                f"{cls.__name__} in its plan (found {type(self.detail).__name__})")
        return self.detail


def register_detail_planner(backend: str, kind: str, planner: DetailPlanner) -> None:
    """Plan the groups of (`backend`, `kind`) with `planner` (a kind a plugin
    adds, written by an existing writer: `plan_pointwise` for a kind that
    runs as pointwise does); a second planner for a pair already taken is a
    bug."""
    key = (backend, kind)
    if DETAIL_PLANNERS.get(key, planner) is not planner:
        raise ValueError(f"a detail planner for backend {backend!r} and kind {kind!r} is "
                         "registered twice")
    DETAIL_PLANNERS[key] = planner


def _int_attr(group: GroupOp, key: str) -> int:
    attr = group.attributes.get(key)
    return attr.value.data if isinstance(attr, IntegerAttr) else 0


@contextmanager
def group_plan(group: GroupOp, target: Target) -> Iterator[GroupPlan]:
    """The plan of `group` for `target`, valid inside the `with` block (its
    body may be a decomposed copy, erased on exit)."""
    kind, backend = kind_name(group), group_backend(group)
    name = group.attributes.get("name")
    schedule = group.attributes.get(SCHEDULE_KEY)
    planner = DETAIL_PLANNERS.get((backend, kind))
    with decomposed(group) if (backend, kind) in DECOMPOSED else _itself(group) as body:
        yield GroupPlan(
            group=group, body=body, name=name.data if isinstance(name, StringAttr) else "",
            kind=kind, backend=backend,
            schedule=schedule if isinstance(schedule, ScheduleAttr) else None,
            shared_bytes=_int_attr(group, "shared_bytes_est"),
            registers=_int_attr(group, "est_registers"),
            max_registers=_int_attr(group, MAX_REGISTERS_ATTR),
            detail=planner(group, body, target) if planner is not None else None)


@contextmanager
def _itself(group: GroupOp) -> Iterator[GroupOp]:
    yield group
