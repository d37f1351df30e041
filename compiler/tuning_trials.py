"""What the autotuner times (`compiler/autotune.py`): one-group functions,
the split alternative of a fused group, fingerprints and contested groups.

A *trial* is a function `@tN` of a tuning module holding one clone of a
group (with one candidate schedule) and the constants it reads; every other
operand becomes an argument. One `generate_program` of that module gives
every trial's kernel in one kernels.py with unique names, which the GPU
timer compiles in parallel.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from xdsl.dialects.builtin import FunctionType, ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from fusec.analysis.cost_model import op_flops
from fusec.analysis.device_dtypes import value_dtype
from fusec.analysis.program import TensorSpec
from fusec.analysis.remarks import RemarkCollector
from fusec.analysis.targets import Target
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.schedule import SCHEDULE_ATTRS, SCHEDULE_KEY, ScheduleAttr
from fusec.passes.group_each_op import GroupEachOpPass
from fusec.version import __version__

# Group attributes that record decisions or names, not what the group computes.
_NOT_FINGERPRINTED = ("name", SCHEDULE_KEY, "schedule_text", "shared_bytes_est", "kernel",
                      "grid", "block", "shared_bytes", "est_registers")
_VALUE_NAME = re.compile(r"%[A-Za-z0-9_$.-]+")
TIMING_METHOD = "timing 2"
"""How times are measured (`runtime/tuning_timer.py`), in every fingerprint:
times of an earlier method are not reused (1: one launch per sample after a
host-timed warm-up; 2: interleaved, calibrated event batches, inputs rotated
past the L2)."""


def group_name(group: GroupOp) -> str:
    """The group's `name` attribute."""
    attr = group.attributes.get("name")
    return attr.data if isinstance(attr, StringAttr) else "?"


def body_ops(group: GroupOp) -> list[Operation]:
    """The group's ops, without its yield."""
    return [op for op in group.block.ops if not isinstance(op, YieldOp)]


def fingerprint(group: GroupOp, top_k: int) -> str:
    """The group's printed form (shapes and dtypes included), its value
    names normalised and naming attributes dropped, with the candidate count,
    the fusec version and the timing method: equal for the same group in
    another model."""
    clone = group.clone()
    for key in _NOT_FINGERPRINTED:
        clone.attributes.pop(key, None)
    text = _print(clone)
    names: dict[str, str] = {}
    text = _VALUE_NAME.sub(lambda m: names.setdefault(m.group(0), f"%v{len(names)}"), text)
    return f"fusec {__version__}; {TIMING_METHOD}; top-k {top_k}\n{text}"


def _print(op: Operation) -> str:
    import io

    out = io.StringIO()
    Printer(stream=out).print_op(op)
    return out.getvalue()


def schedule_json(attr: ScheduleAttr | None) -> dict[str, object] | None:
    """A schedule as JSON (the tuning cache)."""
    return None if attr is None else {"name": attr.name, "fields": attr.as_dict()}


def schedule_from_json(data: object) -> ScheduleAttr | None:
    """The schedule `schedule_json` wrote; raises ValueError for anything
    else: another shape, an unknown schedule or field, a value that is not
    an integer or a string (a bool, a float), or one its verifier refuses.
    Whether the group may run it is `scheduling.candidates.refusal`'s call."""
    if data is None:
        return None
    if not isinstance(data, dict) or set(data) != {"name", "fields"} \
            or not isinstance(data["fields"], dict):
        raise ValueError("a schedule is {\"name\": ..., \"fields\": {...}}")
    cls = next((c for c in SCHEDULE_ATTRS if c.name == data["name"]), None)
    if cls is None:
        raise ValueError(f"unknown schedule {data['name']!r}")
    fields: dict[str, object] = data["fields"]
    for key, value in fields.items():
        if type(value) not in (int, str):  # bool is an int to Python, not to a schedule
            raise ValueError(f"{cls.name}: {key} = {json.dumps(value)} is not an integer "
                             "or a string")
    try:
        attr = cls.make(**{k: v for k, v in fields.items() if isinstance(v, int | str)})
        attr.verify()
    except VerifyException as err:
        raise ValueError(str(err)) from None
    return attr


def schedule_text(attr: ScheduleAttr | None) -> str:
    """`#fusion.pointwise<...>`, or `(none)` for a layout copy."""
    return "(none)" if attr is None else str(attr)


def trial_function(group: GroupOp, name: str, attr: ScheduleAttr | None) -> FuncOp:
    """`@name` running a clone of `group` with schedule `attr`: the
    constants it reads are cloned, its other operands are arguments."""
    args = [v for v in group.inputs if not isinstance(v.owner, nn.ConstantOp)]
    block = Block(arg_types=[v.type for v in args])
    mapping: dict[SSAValue, SSAValue] = dict(zip(args, block.args, strict=True))
    for v in group.inputs:
        if isinstance(v.owner, nn.ConstantOp) and v not in mapping:
            const = v.owner.clone()
            block.add_op(const)
            mapping[v] = const.results[0]
    clone = group.clone()
    clone.operands = [mapping[v] for v in group.inputs]
    if attr is None:
        clone.attributes.pop(SCHEDULE_KEY, None)
    else:
        clone.attributes[SCHEDULE_KEY] = attr
    block.add_op(clone)
    block.add_op(ReturnOp(*clone.results))
    ftype = FunctionType.from_lists([a.type for a in block.args],
                                    [r.type for r in clone.results])
    return FuncOp(name, ftype, Region(block))


def inline_group(group: GroupOp) -> None:
    """Put `group`'s ops back in its block, in its place, and erase it."""
    parent = group.parent_block()
    assert parent is not None
    yielded = group.block.last_op
    assert isinstance(yielded, YieldOp)
    for arg, value in zip(group.block.args, group.inputs, strict=True):
        arg.replace_all_uses_with(value)
    for op in body_ops(group):
        op.detach()
        parent.insert_op_before(op, group)
    for result, value in zip(group.results, yielded.operands, strict=True):
        value.name_hint = value.name_hint or result.name_hint
        result.replace_all_uses_with(value)
    group.detach()
    group.erase()


def is_attention(group: GroupOp) -> bool:
    """Whether `group` is a fused attention (`fuse-attention`)."""
    kind = group.attributes.get("kind")
    return isinstance(kind, StringAttr) and kind.data == "attention"


def split_group(group: GroupOp, target: Target, limit: int) -> list[GroupOp]:
    """`group` split into one group per op in its place (as `group-each-op`
    makes them), or for an attention its three-kernel form
    (`split_attention`), each given the model's schedule; the new groups, in
    order."""
    from fusec.analysis.schedule_choice import Scheduler

    if is_attention(group):
        return split_attention(group, target, limit)
    parent = group.parent_block()
    assert parent is not None
    func = parent.parent_op()
    assert isinstance(func, FuncOp)
    before = {id(op) for op in parent.ops if isinstance(op, GroupOp)}
    inline_group(group)
    GroupEachOpPass().group_function(func)
    parts = [op for op in parent.ops if isinstance(op, GroupOp) and id(op) not in before]
    scheduler = Scheduler(target, limit, RemarkCollector())
    for part in parts:
        scheduler.schedule(part)
    return parts


def _formed_attention(group: GroupOp, target: Target, limit: int) -> tuple[FuncOp, list[GroupOp]]:
    """A scratch function running `group`'s ops as the default pipeline
    groups them when `fuse-attention` refuses (`form-fusion-groups`, then
    `group-each-op`), each group scheduled; the function and its groups."""
    from xdsl.context import Context

    from fusec.analysis.schedule_choice import Scheduler
    from fusec.passes.form_fusion_groups import FormFusionGroupsPass

    func = trial_function(group, "split", None)
    module = ModuleOp([func])
    inline_group(next(op for op in func.body.block.ops if isinstance(op, GroupOp)))
    FormFusionGroupsPass(target=target.name, remarks=False).apply(Context(), module)
    GroupEachOpPass().group_function(func)
    parts = [op for op in func.body.block.ops if isinstance(op, GroupOp)]
    scheduler = Scheduler(target, limit, RemarkCollector())
    for part in parts:
        scheduler.schedule(part)
    return func, parts


def split_attention(group: GroupOp, target: Target, limit: int) -> list[GroupOp]:
    """The attention `group` replaced in its function by its three-kernel
    form (`_formed_attention`), the parts named after the function's
    groups; the new groups, in order."""
    from fusec.passes.group_each_op import next_group_number

    parent = group.parent_block()
    func = parent.parent_op() if parent is not None else None
    assert parent is not None and isinstance(func, FuncOp)
    scratch, _ = _formed_attention(group, target, limit)
    args = [v for v in group.inputs if not isinstance(v.owner, nn.ConstantOp)]
    mapping: dict[SSAValue, SSAValue] = dict(zip(scratch.body.block.args, args, strict=True))
    number = next_group_number(func)
    parts: list[GroupOp] = []
    for op in list(scratch.body.block.ops):
        if isinstance(op, ReturnOp):
            for result, value in zip(group.results, op.operands, strict=True):
                result.replace_all_uses_with(mapping[value])
            break
        clone = op.clone(value_mapper=mapping)
        parent.insert_op_before(clone, group)
        if isinstance(clone, GroupOp):
            clone.attributes["name"] = StringAttr(f"g{number + len(parts)}")
            parts.append(clone)
    group.detach()
    group.erase()
    return parts


def split_parts(group: GroupOp, target: Target, limit: int) -> list[GroupOp]:
    """The groups `split_group` would make of `group`, in a scratch module
    (nothing of the real module changes)."""
    if is_attention(group):
        return _formed_attention(group, target, limit)[1]
    func = trial_function(group, "split", group.attributes.get(SCHEDULE_KEY)
                          if isinstance(group.attributes.get(SCHEDULE_KEY), ScheduleAttr)
                          else None)
    ModuleOp([func])
    inner = next(op for op in func.body.block.ops if isinstance(op, GroupOp))
    return split_group(inner, target, limit)


@dataclass(frozen=True)
class Contest:
    """Why fused vs split is timed for a group, and the model's two times."""

    reason: str
    fused_est_us: float
    split_est_us: float


def _nbytes(v: SSAValue) -> int:
    return TensorSpec(tensor_shape(v), value_dtype(v)).nbytes


def contest(group: GroupOp, target: Target, ratio: float, intensity: float) -> Contest | None:
    """A fused attention (always: against its three-kernel form), or a
    fused group of several ops whose estimate against its split parts is
    within `ratio` either way, or whose arithmetic intensity is above
    `intensity` FLOP/B; None for others (single ops, library GEMMs)."""
    if is_attention(group):
        return _attention_contest(group, target)
    ops = [op for op in body_ops(group) if not isinstance(op, nn.ConstantOp)]
    if len(ops) < 2 or "gemm" in group.attributes:
        return None
    flops = sum(op_flops(op) for op in ops)
    moved = sum(_nbytes(v) for v in (*group.inputs, *group.outputs))
    fused = target.kernel_time(moved, flops) * 1e6
    split = sum(target.kernel_time(
        sum(_nbytes(v) for v in (*dict.fromkeys(op.operands), *op.results)), op_flops(op))
        for op in ops) * 1e6
    if moved and flops / moved > intensity:
        return Contest(f"arithmetic intensity {flops / moved:.1f} FLOP/B, above {intensity:g}",
                       fused, split)
    if split / ratio <= fused <= split * ratio:
        return Contest(f"estimated fused {fused:.1f} us vs split {split:.1f} us, within "
                       f"{ratio:g}x", fused, split)
    return None


def _attention_contest(group: GroupOp, target: Target) -> Contest:
    """The model's times of a fused attention (its recorded tile, else the
    model's choice) and of its three-kernel form, as `fuse-attention`'s
    gain check prices them: the model cannot rank them reliably (the
    efficiencies behind both are one measured shape's), a GPU can."""
    from fusec.scheduling.attention import choose_tile, fused_time, unfused_time
    from fusec.scheduling.attention_group import group_shape
    from fusec.scheduling.attention_schedule import recorded_tile
    from fusec.scheduling.gemm_choice import cupy_tf32, library_available

    shape = group_shape(group)
    tile = recorded_tile(group) or choose_tile(shape, target)
    fused = fused_time(tile, shape, target) * 1e6 if not isinstance(tile, str) else 0.0
    split = unfused_time(shape, target, "auto", library_available(), cupy_tf32()) * 1e6
    return Contest(f"fused attention against its three-kernel form, estimated fused "
                   f"{fused:.1f} us vs split {split:.1f} us", fused, split)
