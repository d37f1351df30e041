"""A planner's result for a group, decided once and read back while the group
is unchanged (the scheduler and the writer of one group ask the same
question: the row analysis, the GEMM shape, the transposed tile).

xDSL ops are mutable, so the result is kept with a fingerprint of what the
planner reads: the identity, operands, attributes, properties and result
types of every op of the group's body, its block arguments' types, the
group's operands and its own attributes. Any change to them misses and plans
again. The group attributes that record decisions made *from* these results
(`RECORDED`: the schedule and its readable line, the shared and register
estimates) are left out of the fingerprint, since no planner cached here reads
them and the scheduler writes them between its question and the writer's; a
planner that depends on the schedule passes it as `extra`.

The memo holds its results strongly (each names the group it planned), so it
keeps only the last `SIZE` groups.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import SCHEDULE_KEY

T = TypeVar("T")

SIZE = 256
RECORDED = frozenset({SCHEDULE_KEY, "schedule_text", "shared_bytes_est", "est_registers"})

_memo: OrderedDict[tuple[str, int], tuple[GroupOp, tuple[Any, ...], Any]] = OrderedDict()


def fingerprint(group: GroupOp, extra: Hashable = None) -> tuple[Any, ...]:
    """What a cached planner reads of `group` (compared with `==`)."""
    ops = tuple(
        (id(op), op.name, tuple(id(v) for v in op.operands),
         tuple(r.type for r in op.results), tuple(op.attributes.items()),
         tuple(op.properties.items()))
        for op in group.block.ops)
    args = tuple(a.type for a in group.block.args)
    own = tuple((k, v) for k, v in group.attributes.items() if k not in RECORDED)
    return (ops, args, tuple(id(v) for v in group.operands), own, extra)


def recorded(group: GroupOp) -> tuple[Any, ...]:
    """The recorded decisions of `group` (`RECORDED`), for the `extra` of a
    planner that reads them (a register estimate under the recorded schedule)."""
    return tuple(group.attributes.get(key) for key in sorted(RECORDED))


def planned(name: str, group: GroupOp, plan: Callable[[GroupOp], T],
            extra: Hashable = None) -> T:
    """`plan(group)`, computed once while `group` (and `extra`) stay as they were."""
    key = (name, id(group))
    print_ = fingerprint(group, extra)
    hit = _memo.get(key)
    if hit is not None and hit[0] is group and hit[1] == print_:
        _memo.move_to_end(key)
        result: T = hit[2]
        return result
    result = plan(group)
    _memo[key] = (group, print_, result)
    _memo.move_to_end(key)
    while len(_memo) > SIZE:
        _memo.popitem(last=False)
    return result
