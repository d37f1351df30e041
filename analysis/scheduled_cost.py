"""A candidate group priced under the schedule the scheduler would give it.

Legality's summaries (`GroupInfo`) guess a kernel's threads from its shape;
the kernel that is emitted runs the schedule its kind's `choose` picks
(elements per thread, rows split over blocks or not, a row re-read from
memory, two kernels for a split column, a GEMM or window tile). `gain_ok`
asks this module for that schedule: the candidate's ops are cloned into a
detached `fusion.group` (`candidate_group.detached_group`), scheduled for
the target (remarks dropped), priced by its kind's `scheduled_kernel`, and
the copy is erased again. Results are cached per kind and *structure* of
the ops and outputs (`structure`): the same group is judged against many
neighbours, and a model's repeated layers (twelve identical transformer
blocks) ask the same question once per layer; the answer depends on the ops,
their types and attributes and how they connect, never on which values they
are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from fusec.analysis.candidate_group import detached_group
from fusec.analysis.diagnostics import FusecError
from fusec.analysis.group_kind import ScheduleContext, find_kind
from fusec.analysis.remarks import RemarkCollector
from fusec.analysis.targets import Target
from fusec.dialects.schedule import SCHEDULE_KEY


@dataclass(frozen=True)
class ScheduledKernel:
    """What a group costs under its schedule (`GroupKind.scheduled_kernel`)."""

    line: str
    """The readable schedule `choose` returns."""
    parallel: int
    """Threads the schedule launches (grid x block, summed over its kernels)."""
    path: str
    """The `cost_model.KERNEL_PATHS` key of the kernel."""
    launches: int = 1
    """Kernels emitted (2 for a column split into partial statistics and outputs)."""


Structure = tuple[object, ...]
ScheduleCache = dict[tuple[str, Structure, Target], "ScheduledKernel | None"]
"""Scheduled kernels by (kind, `structure` of the ops and outputs, target)."""


def structure(ops: Sequence[Operation], outputs: Sequence[SSAValue]) -> Structure:
    """What a candidate's schedule and price depend on, as a hashable key:
    each op's name, attributes, properties and result types, and where each
    operand comes from (a result of an earlier op of `ops`, by position, or
    the k-th distinct value from outside, with its type), then which results
    are the outputs. Two candidates with the same structure (the same block
    of two layers) get the same schedule."""
    made: dict[SSAValue, tuple[object, ...]] = {}
    outside: dict[SSAValue, int] = {}
    key: list[object] = []
    for i, op in enumerate(ops):
        sources: list[object] = []
        for v in op.operands:
            if v in made:
                sources.append(made[v])
            else:
                sources.append(("in", outside.setdefault(v, len(outside)), v.type))
        key.append((op.name, tuple(sources), tuple(r.type for r in op.results),
                    tuple(sorted(op.attributes.items())), tuple(sorted(op.properties.items()))))
        for r, result in enumerate(op.results):
            made[result] = ("op", i, r)
    key.append(tuple(made.get(v, ("in", outside.get(v, -1), v.type)) for v in outputs))
    return tuple(key)


class _Silent(RemarkCollector):
    """Keeps the remarks of a candidate's scheduling from `--remarks`: the
    candidate is no group of the program."""

    def add(self, severity: str, message: str) -> None:
        """Dropped."""


def scheduled_kernel(kind: str, ops: Sequence[Operation], outputs: Sequence[SSAValue],
                     target: Target, cache: ScheduleCache) -> ScheduledKernel | None:
    """The kernel a group of `kind` holding `ops` and writing `outputs`
    becomes on `target` under the schedule `choose` would pick; None for a
    kind without a scheduler, a group writing nothing, or one its kind
    cannot schedule (then the summary estimate stands)."""
    key = (kind, structure(ops, outputs), target)
    if key in cache:
        return cache[key]
    impl = find_kind(kind)
    found: ScheduledKernel | None = None
    if impl is not None and outputs and ops:
        ctx = ScheduleContext(target, target.shared_memory_per_block, _Silent())
        with detached_group(ops, kind, outputs) as group:
            try:
                attr, line, _ = impl.choose(ctx, group)
                if attr is not None:  # the models below read it, not a second choice
                    group.attributes[SCHEDULE_KEY] = attr
                found = impl.scheduled_kernel(ctx, group, attr)
                found = dataclasses.replace(found, line=line)
            except FusecError:
                found = None
    cache[key] = found
    return found
