"""Ops wrapped into a `fusion.group`: the one builder `form-fusion-groups`
materializes groups with, and the detached copy legality schedules a
candidate group on.

`build_group` moves the given ops into the body of a new group whose block
arguments stand for the values the ops read from outside. `detached_group`
does the same with *clones* of the ops: the group is never inserted in the
function, the originals keep their operands and uses, and the copy is erased
(its uses of outside values dropped) when the `with` block ends, so judging a
candidate leaves the module as it was.

```python
with detached_group(candidate_ops, "reduction") as group:
    attr, line, shared = group_kind("reduction").choose(ctx, group)
```
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Block, Operation, OpResult, Region, SSAValue

from fusec.dialects.fusion import GroupOp, YieldOp

CANDIDATE_NAME = "candidate"
"""The `name` of a detached candidate group (remarks of its `choose` are dropped)."""


def group_inputs(ops: Sequence[Operation]) -> list[SSAValue]:
    """Values `ops` read from outside them, in first-use order."""
    members = set(ops)
    inputs: list[SSAValue] = []
    for op in ops:
        for v in op.operands:
            inside = isinstance(v, OpResult) and v.op in members
            if not inside and v not in inputs:
                inputs.append(v)
    return inputs


def group_outputs(ops: Sequence[Operation]) -> list[SSAValue]:
    """Results of `ops` read outside them (or returned), in program order."""
    members = set(ops)
    return [r for op in ops for r in op.results
            if any(u.operation not in members for u in r.uses)]


def build_group(ops: Sequence[Operation], outputs: Sequence[SSAValue], name: str,
                kind: str) -> GroupOp:
    """A new, unplaced `fusion.group` named `name` of `kind` whose body holds
    `ops` (moved there, in the given order) and yields `outputs`; the
    group's operands are the values the ops read from outside. Outside uses
    of `outputs` are left for the caller to redirect."""
    inputs = group_inputs(ops)
    body = Block(arg_types=[v.type for v in inputs])
    for arg, v in zip(body.args, inputs, strict=True):
        arg.name_hint = v.name_hint
    position = {v: k for k, v in enumerate(inputs)}
    for op in ops:
        if op.parent is not None:  # a recomputed clone has none yet
            op.detach()
        body.add_op(op)
        for i, v in enumerate(op.operands):
            if v in position:
                op.operands[i] = body.args[position[v]]
    body.add_op(YieldOp(list(outputs)))
    attrs = {"name": StringAttr(name), "kind": StringAttr(kind)}
    group = GroupOp(inputs, [r.type for r in outputs], Region(body), attrs)
    group.location = ops[0].location
    for k, r in enumerate(outputs):
        group.outputs[k].name_hint = r.name_hint
    return group


@contextmanager
def detached_group(ops: Sequence[Operation], kind: str,
                   outputs: Sequence[SSAValue] | None = None) -> Iterator[GroupOp]:
    """A group of `kind` holding clones of `ops` (in program order) and
    yielding the clones of `outputs` (default: the results read outside
    `ops`), not inserted anywhere; erased on exit."""
    wanted = list(group_outputs(ops) if outputs is None else outputs)
    mapping: dict[SSAValue, SSAValue] = {}
    clones: list[Operation] = []
    for op in ops:
        clone = op.clone(value_mapper=mapping)  # members' results map to their clones
        for old, new in zip(op.results, clone.results, strict=True):
            mapping[old] = new
            new.name_hint = old.name_hint
        clones.append(clone)
    group = build_group(clones, [mapping[v] for v in wanted], CANDIDATE_NAME, kind)
    try:
        yield group
    finally:
        group.erase(safe_erase=False)
