"""The `group-each-op` pass: every `nn` op becomes its own `fusion.group`.

This is the fusion-off baseline: one kernel per op. Code generation works on
groups only, so a module must be grouped before `lower-to-numba`; fusion
passes that run earlier make groups bigger, and this pass then wraps only what
they left outside any group.

Two kinds of ops stay outside: `nn.constant` (data of the program, not a
kernel) and `nn.reshape` (a view of its contiguous operand, not a kernel).
A reshape of an input inside a pointwise or reduction group moves out too
(`hoist_input_reshapes`): the kernel reads the reshaped input directly.
A splat constant of more than one element that a group reads only through
elementwise ops, or as a matmul or window op's operand, moves into the group
instead (a copy per group): the kernel writes it as a literal, and neither
constants.npz nor device memory holds its elements.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from fusec.analysis.diagnostics import op_error
from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.analysis.rewriting import copy_location
from fusec.codegen.splat_inputs import inline_splat_inputs
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp, YieldOp

# The group `kind` (which emitter generates it) of each op kind. Constants and
# reshapes are never grouped; opaque ops cannot be.
GROUP_KINDS: dict[OpKind, str] = {
    OpKind.ELEMENTWISE: "pointwise",
    OpKind.BROADCAST: "pointwise",
    OpKind.LAYOUT: "layout",
    OpKind.REDUCTION: "reduction",
    OpKind.CONTRACTION: "contraction",
    OpKind.WINDOW: "window",
}

# Ops that stay outside every group.
UNGROUPED: tuple[type[Operation], ...] = (nn.ConstantOp, nn.ReshapeOp)

_GROUP_NAME = re.compile(r"g(\d+)")


def group_kind(op: Operation) -> str:
    """The `kind` of a single-op group around `op`, or a located error."""
    kind = GROUP_KINDS.get(op_kind(op))
    if kind is None:
        raise op_error(op, f"'{op.name}' cannot be placed in a fusion group")
    return kind


def wrap_in_group(op: Operation, name: str, kind: str) -> GroupOp:
    """Move `op` into a new `fusion.group` at its place; returns the group.

    Steps: (1) one block argument per distinct operand (an op reading `%x`
    twice gets one input); (2) the group takes over the op's result names and
    uses; (3) the op moves into the body, reading the block arguments, and a
    `fusion.yield` hands its results out.
    """
    inputs: list[SSAValue] = list(dict.fromkeys(op.operands))
    block = Block(arg_types=[v.type for v in inputs])
    attrs: dict[str, Attribute] = {"name": StringAttr(name), "kind": StringAttr(kind)}
    group = GroupOp(inputs, [r.type for r in op.results], Region(block), attrs)
    group.location = op.location
    parent = op.parent_block()
    assert parent is not None
    parent.insert_op_before(group, op)
    for old, new in zip(op.results, group.results, strict=True):
        new.name_hint = old.name_hint
        old.replace_all_uses_with(new)
    op.detach()
    arg_of = {v: a for v, a in zip(inputs, block.args, strict=True)}
    op.operands = [arg_of[v] for v in op.operands]
    block.add_op(op)
    block.add_op(YieldOp(list(op.results)))
    return group


def sink_splat_operands(group: GroupOp) -> None:
    """Move each splat constant operand of `group` (more than one element)
    that its kernel can read as a literal into its body
    (`codegen/splat_inputs.py`); the outside constant goes when nothing
    else reads it."""
    inline_splat_inputs(group)


HOISTED_KINDS = ("pointwise", "reduction")
"""Group kinds whose input reshapes `hoist_input_reshapes` moves out."""


def hoist_input_reshapes(group: GroupOp) -> None:
    """Move each `nn.reshape` of an input of `group` (of a kind in
    `HOISTED_KINDS`) that only elementwise and reduction ops read out of
    the body: the group reads the reshaped value, a view of the same
    buffer (a reshape outside a group moves no data), at its own shape. A
    row kernel reads an input of the row's shape by quads, one through a
    view an element at a time (a layer norm after a GEMM whose `[B*S, D]`
    result is viewed as `[B, S, D]`)."""
    if getattr(group.attributes.get("kind"), "data", "") not in HOISTED_KINDS:
        return
    block = group.block
    for op in list(block.ops):
        if not isinstance(op, nn.ReshapeOp) or not isinstance(op.operands[0], BlockArgument) \
                or op.operands[0].owner is not block:
            continue
        if not op.result.uses or any(
                op_kind(u.operation) not in (OpKind.ELEMENTWISE, OpKind.REDUCTION)
                for u in op.result.uses):
            continue  # read by a view or yielded: it stays
        arg = op.operands[0]
        outside = nn.ReshapeOp.create(operands=[group.operands[arg.index]],
                                      result_types=[op.result.type])
        outside.result.name_hint = op.result.name_hint
        copy_location(op, outside)
        parent = group.parent_block()
        assert parent is not None
        parent.insert_op_before(outside, group)
        new_arg = block.insert_arg(op.result.type, len(block.args))
        group.operands = [*group.operands, outside.result]
        op.result.replace_all_uses_with(new_arg)
        op.detach()
        op.erase()
        if not arg.uses:
            group.operands = [v for i, v in enumerate(group.operands) if i != arg.index]
            block.erase_arg(arg)


def next_group_number(func: FuncOp) -> int:
    """One past the largest `gN` name among the function's existing groups."""
    largest = -1
    for op in func.walk():
        attr = op.attributes.get("name") if isinstance(op, GroupOp) else None
        if isinstance(attr, StringAttr) and (m := _GROUP_NAME.fullmatch(attr.data)):
            largest = max(largest, int(m.group(1)))
    return largest + 1


@dataclass(frozen=True)
class GroupEachOpPass(ModulePass):
    """Wrap every ungrouped `nn` op (but constants and reshapes) in its own `fusion.group`.

    ```mlir
    // before
    %c = nn.constant dense<2.0> : tensor<f32>
    %y = nn.mul %x, %c : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
    // after `fusec -p group-each-op`
    %c = nn.constant dense<2.0> : tensor<f32>
    %y = fusion.group (%x, %c) {name = "g0", kind = "pointwise"}
        : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32> {
    ^bb0(%0: tensor<4xf32>, %1: tensor<f32>):
      %y_1 = nn.mul %0, %1 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
      fusion.yield %y_1 : tensor<4xf32>
    }
    ```

    Group names `gN` are unique per function and continue after the names of
    groups already there; `kind` says which emitter generates the kernel
    (pointwise, layout, reduction, contraction, window). Each group keeps the
    source location of its op.
    """

    name = "group-each-op"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in op.walk():
            if isinstance(func, FuncOp) and func.body.blocks:
                self.group_function(func)

    def group_function(self, func: FuncOp) -> None:
        """Wrap the top-level ops of `func`'s body, in program order."""
        number = next_group_number(func)
        for block in func.body.blocks:
            for inner in list(block.ops):
                if inner.dialect_name() != "nn" or isinstance(inner, UNGROUPED):
                    continue
                wrap_in_group(inner, f"g{number}", group_kind(inner))
                number += 1
            for group in [g for g in block.ops if isinstance(g, GroupOp)]:
                sink_splat_operands(group)
                hoist_input_reshapes(group)
