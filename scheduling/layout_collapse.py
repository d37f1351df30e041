"""The collapsed form of a layout group: the same copy over as few
dimensions as the op allows, so its kernel splits each flat index into as
few coordinates as possible (`codegen/layout.py` emits it on the pointwise
view schedule).

- transpose: size-1 dimensions dropped and output neighbours that stay
  neighbours in the input merged (`[2, 3, 4]` by `perm = [2, 0, 1]` is
  `[6, 4]` by `[1, 0]`);
- concat along `axis`: `[outer, width_k * inner]` per operand, concatenated
  along axis 1;
- gather along `axis`: table `[outer, size, inner]`, indices flat `[count]`;
- slice: size-1 dimensions dropped, and a dimension taken whole merged into
  the one before when that one has step 1;
- reshape: a flat copy of `[numel]`.

The collapsed group is a detached copy (its inputs are not wired to the
program's values); its block arguments keep the original's order, so the
kernel's parameters refer to the same group operands. Each argument is
passed as a flat contiguous view, so its collapsed shape needs no copy.

`layout_ops` checks what a layout group holds and `collapsed` gives the
collapsed group: the layout kind schedules it (`scheduling/kinds/layout.py`)
and the emitter writes it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from xdsl.dialects.builtin import IntegerAttr, IntegerType, TensorType
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from fusec.analysis.device_dtypes import UnsupportedTypeError, value_dtype
from fusec.analysis.diagnostics import op_error
from fusec.analysis.view_operands import CHAINED_VIEWS, computed_ops
from fusec.dialects import nn, shapes
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.nn_base import element_type, int_list, tensor_shape

Shapes = tuple[list[list[int]], list[int], dict[str, Attribute]]
"""Collapsed operand shapes (in operand order), result shape, attributes."""


def _axis(axis: int) -> dict[str, Attribute]:
    return {"axis": IntegerAttr(axis, IntegerType(64))}


def collapse_transpose(
    in_shape: Sequence[int], perm: Sequence[int]
) -> tuple[list[int], list[int]]:
    """Drop size-1 dimensions and merge runs of output dimensions that stay
    neighbours in the input; returns the collapsed input shape and perm
    (at least one dimension)."""
    kept = [p for p in perm if in_shape[p] != 1]
    runs: list[list[int]] = []
    for p in kept:
        if runs and runs[-1][-1] + 1 == p:
            runs[-1].append(p)
        else:
            runs.append([p])
    if not runs:
        return [1], [0]
    order = sorted(range(len(runs)), key=lambda r: runs[r][0])  # runs in input order
    new_shape = [shapes.numel([in_shape[p] for p in runs[r]]) for r in order]
    position = {r: k for k, r in enumerate(order)}
    return new_shape, [position[r] for r in range(len(runs))]


def _transpose(op: nn.TransposeOp) -> Shapes:
    in_shape, perm = collapse_transpose(op.operand_shape(), op.perm)
    return [in_shape], [in_shape[p] for p in perm], {"perm": int_list(perm)}


def _concat(op: nn.ConcatOp) -> Shapes:
    out, axis = op.result_shape, op.axis
    outer, inner = shapes.numel(out[:axis]), shapes.numel(out[axis + 1:])
    ins = [[outer, tensor_shape(v)[axis] * inner] for v in op.inputs]
    return ins, [outer, out[axis] * inner], _axis(1)


def _gather(op: nn.GatherOp) -> Shapes:
    table, axis = op.operand_shape(0), op.axis
    outer, inner = shapes.numel(table[:axis]), shapes.numel(table[axis + 1:])
    count = shapes.numel(op.operand_shape(1))
    return [[outer, table[axis], inner], [count]], [outer, count, inner], _axis(1)


def _slice(op: nn.SliceOp) -> Shapes:
    dims: list[list[int]] = []  # [input size, start, step, output size]
    for n, start, step, m in zip(op.operand_shape(), op.starts, op.strides, op.result_shape,
                                 strict=True):
        if n == 1 and m == 1:
            continue  # start 0, one element: nothing to index
        whole = start == 0 and step == 1 and m == n
        if dims and whole and dims[-1][2] == 1:
            prev = dims[-1]
            dims[-1] = [prev[0] * n, prev[1] * n, 1, prev[3] * n]
        else:
            dims.append([n, start, step, m])
    dims = dims or [[1, 0, 1, 1]]
    limits = [start + (m - 1) * step + 1 if m else start for _, start, step, m in dims]
    attrs: dict[str, Attribute] = {"starts": int_list([d[1] for d in dims]),
                                   "limits": int_list(limits),
                                   "strides": int_list([d[2] for d in dims])}
    return [[d[0] for d in dims]], [d[3] for d in dims], attrs


def _reshape(op: nn.ReshapeOp) -> Shapes:
    n = max(1, shapes.numel(op.result_shape))
    return [[n]], [n], {}


_COLLAPSE = {nn.TransposeOp: _transpose, nn.ConcatOp: _concat, nn.GatherOp: _gather,
             nn.SliceOp: _slice, nn.ReshapeOp: _reshape}


def collapsed_group(group: GroupOp, op: Operation) -> GroupOp:
    """A detached copy of layout `group` (whose one op is `op`) with `op`
    collapsed; `group` itself when an input would need two shapes (a
    gather of a value by itself)."""
    ins, out, attrs = _COLLAPSE[type(op)](op)  # pyright: ignore[reportArgumentType]
    args = list(group.block.args)
    arg_shapes: dict[int, list[int]] = {}
    for v, shape in zip(op.operands, ins, strict=True):
        k = args.index(v)  # pyright: ignore[reportArgumentType]
        if arg_shapes.setdefault(k, shape) != shape:
            return group
    types = [TensorType(element_type(a), arg_shapes.get(k, [shapes.numel(tensor_shape(a))]))
             for k, a in enumerate(args)]
    block = Block(arg_types=types)
    operands: list[SSAValue] = [block.args[args.index(v)] for v in op.operands]  # type: ignore[arg-type]
    result = TensorType(element_type(op.results[0]), out)
    new = type(op).create(operands=operands, result_types=[result], attributes=attrs)
    block.add_ops([new, YieldOp([new.results[0]])])
    return GroupOp([], [result], Region(block), dict(group.attributes))


_LAYOUT_OPS = (nn.TransposeOp, nn.SliceOp, nn.ConcatOp, nn.GatherOp, nn.ReshapeOp)


def layout_ops(group: GroupOp) -> list[Operation]:
    """The layout op of the group (or its chain of slices, reshapes and
    transposes, each reading the one before), or a located error."""
    ops = [op for op in group.block.ops if not isinstance(op, YieldOp)]
    inside = set(ops)
    # the elementwise ops whose results only the chain reads are evaluated at
    # the element the chain's view reads (`codegen/computed_root.py`), with the
    # splat constants they read as literals (moved in by `group-each-op`)
    computed = computed_ops(inside)
    literals = [op for op in ops if isinstance(op, nn.ConstantOp) and all(
        u.operation in computed for u in op.results[0].uses)]
    roots = [op for op in ops if op in computed]
    ops = [op for op in ops if op not in literals and op not in computed]
    # a lone slice, reshape or transpose over computed ops reads them through its view
    chain = (len(ops) > 1 or bool(roots)) and all(isinstance(op, CHAINED_VIEWS) for op in ops)
    if not ops or not (chain or (len(ops) == 1 and isinstance(ops[0], _LAYOUT_OPS))):
        names = ", ".join(op.name for op in ops) or "no op"
        raise op_error(group, "a layout group must hold one layout op or a chain of slices, "
                       f"reshapes and transposes, got {names}")
    terminator = group.block.last_op
    assert isinstance(terminator, YieldOp)
    links = all(op.operands[0] is prev.results[0] for prev, op in itertools.pairwise(ops))
    if list(terminator.values) != list(ops[-1].results) or not links or any(
        operand.owner is not group.block and operand.owner not in roots
        for operand in ops[0].operands
    ) or (roots and not chain):
        raise op_error(group, "a layout group must read its inputs and yield its op's result"
                       + (" (each op of a chain reading the one before)" if chain else ""))
    try:
        for v in (*ops[0].operands, *(r for op in ops for r in op.results)):
            value_dtype(v)
    except UnsupportedTypeError as err:
        raise op_error(ops[0], str(err)) from None
    return ops


def collapsed(group: GroupOp) -> GroupOp:
    """The checked layout `group` as a detached pointwise-view group over its
    collapsed shapes (what both the scheduler and the emitter read); a chain,
    or a lone view over ops evaluated where it reads them, as it is (the
    pointwise emitter reads its composed view and merges the axes the view
    steps across alike)."""
    ops = layout_ops(group)
    # a lone op over computed ops reads them at its uncollapsed view's elements
    alone = len(ops) == 1 and not computed_ops(group.block.ops)
    return collapsed_group(group, ops[0]) if alone else group
