"""The emitter of `pointwise` groups: any DAG of elementwise ops in one kernel.

A group body may hold every elementwise op (`compiler.op_kinds` ELEMENTWISE,
cmp/select/cast and batch_norm included) and `nn.broadcast_to`, with one or
several results.
Elementwise ops commute with broadcasting, so one thread computes one element
of the iteration shape (the broadcast of the result shapes) end to end: it
loads each group input at its broadcast index, evaluates the ops as named
temporaries (`scalar_expr`) and stores every result.

```mlir
%y = fusion.group (%x, %b) {name = "g0", kind = "pointwise"}
    : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
^bb0(%xa: tensor<4x8xf32>, %ba: tensor<8xf32>):
  %s = nn.add %xa, %ba : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r = nn.relu %s : tensor<4x8xf32>
  fusion.yield %r : tensor<4x8xf32>
}
```

becomes a grid-stride loop over the 32 elements: `i1 = i % 8` picks the
element of `%b`; `%x` and the result are read and written at `i` directly.
A result smaller than the iteration shape is written only by the threads at
coordinate 0 of the dimensions it is broadcast along. The `[C]` parameters of
an undecomposed `nn.batch_norm` are read as `[C, 1, ..., 1]` (along axis 1).

Schedule (`#fusion.pointwise<elements_per_thread = E, block = B>`, chosen
by `scheduling/pointwise.py`): B threads per block, one block per chunk of
B * E elements; thread t takes the chunk's elements t, t + B, ... (each warp load
reads 128 consecutive bytes) and issues all their loads before any
arithmetic. Every array is passed as a flat view; full-shaped operands are
read at the element's flat index, broadcast ones at an index computed from
the element's coordinates, scalars once per thread. A partial last chunk
loads at clamped indices and stores only the elements that exist. Half
precision is loaded into float32, computed there and rounded on store; an
explicit cast to f16 inside the group rounds where the program says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.ir import Operation, SSAValue

from fusec.analysis.diagnostics import op_error
from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.codegen import pointwise_transpose
from fusec.codegen.kernel_source import (
    KernelParam,
    KernelSource,
    UnsupportedTypeError,
    broadcast_index,
    compute_type,
    float_literal,
    int_literal,
    kernel_header,
    launch_text,
    narrow,
    numba_type,
    scalar_expr,
    unravel,
    value_dtype,
    widen,
)
from fusec.codegen.pointwise_transpose import has_transposes
from fusec.codegen.schedule_input import group_schedule
from fusec.dialects import nn, shapes
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.nn_base import splat_value, tensor_shape
from fusec.dialects.schedule import PointwiseSchedule

# CUDA's limit on gridDim.x: one block per chunk up to it, a grid-stride loop
# over chunks beyond.
MAX_GRID_X = 2**31 - 1

_POINTWISE_KINDS = (OpKind.ELEMENTWISE, OpKind.BROADCAST)
_INDENT = "    "


def collapse_dims(
    out_shape: Sequence[int], shapes_in: Sequence[Sequence[int]]
) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Merge neighbouring dimensions that every operand treats alike.

    Operands are right-aligned against `out_shape`; dimension d of an operand
    is "full" (size equal to the output's) or "broadcast" (size 1). Output
    dimensions of size 1 are dropped, and two neighbours merge when every
    operand is full in both or broadcast in both, so `[4, 8] + [8]` stays 2-d
    while `[2, 3, 4] + [2, 3, 4]` becomes 1-d. Returns the collapsed output
    shape and each operand's collapsed shape (same rank, 1 where broadcast).
    """
    rank = len(out_shape)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes_in]
    dims = [d for d in range(rank) if out_shape[d] != 1]
    groups: list[list[int]] = []
    for d in dims:
        if groups and all((p[groups[-1][-1]] == 1) == (p[d] == 1) for p in padded):
            groups[-1].append(d)
        else:
            groups.append([d])
    out = tuple(shapes.numel([out_shape[d] for d in g]) for g in groups)
    operands = [tuple(shapes.numel([p[d] for d in g]) for g in groups) for p in padded]
    return out, operands


@dataclass(frozen=True)
class _Access:
    """How the kernel reaches one group input or result."""

    name: str  # the kernel parameter
    shape: tuple[int, ...]  # collapsed, same rank as the iteration shape
    dtype: str

    @property
    def numel(self) -> int:
        return shapes.numel(self.shape)


@dataclass
class _Plan:
    """Everything decided before the text is written."""

    group: GroupOp
    ops: list[Operation]
    results: list[SSAValue]
    iter_shape: tuple[int, ...]  # collapsed
    inputs: list[_Access]
    outputs: list[_Access]
    unroll: int = 1  # elements per thread (the schedule's `elements_per_thread`)
    threads: int = 1  # threads per block (the schedule's `block`)

    @property
    def numel(self) -> int:
        return shapes.numel(self.iter_shape)

    def is_full(self, access: _Access) -> bool:
        return access.shape == self.iter_shape

    def needs_coords(self) -> bool:
        """Whether the loop needs coordinates (unravel): for an input neither
        full nor a scalar (hoisted), or a result smaller than the iteration
        shape (its store is guarded by coordinates)."""
        return any(not self.is_full(a) and a.numel != 1 for a in self.inputs) or any(
            not self.is_full(a) for a in self.outputs
        )


def splat_literal(op: nn.ConstantOp) -> str | None:
    """A splat constant as a typed literal (`float32(0.5)`), else None."""
    v = splat_value(op.value)
    if v is None:
        return None
    if v.dtype == np.bool_:
        return "True" if v else "False"
    ctype = compute_type(v.dtype.name)
    if v.dtype.kind in "iu":
        return f"{ctype}({int_literal(int(v))})"
    return float_literal(float(v), ctype)


def _check_group(group: GroupOp, ops: list[Operation]) -> None:
    for op in ops:
        if isinstance(op, nn.ConstantOp):
            # A splat constant inside a group is a literal; other constants
            # stay outside as group inputs.
            if splat_literal(op) is None:
                raise op_error(op, "only splat constants can be inside a pointwise group")
        elif op_kind(op) not in _POINTWISE_KINDS:
            raise op_error(op, f"'{op.name}' cannot be generated in a pointwise group")
    try:
        for v in (*group.block.args, *(r for op in ops for r in op.results)):
            value_dtype(v)
    except UnsupportedTypeError as err:
        raise op_error(group, str(err)) from None


def _channel_shape(op: nn.BatchNormOp) -> tuple[int, ...]:
    """The shape a `[C]` batch-norm parameter is read with: `[C, 1, ..., 1]`
    right-aligned against the input, so NumPy broadcasting puts C on axis 1."""
    x_shape = op.operand_shape()
    return (x_shape[1],) + (1,) * (len(x_shape) - 2)


def load_shapes(group: GroupOp) -> list[tuple[int, ...]]:
    """The shape each group input is indexed with: its own, except for the
    parameters of `nn.batch_norm` (read along dimension 1, not by NumPy rules),
    which must be group inputs used only as such parameters."""
    out = [tensor_shape(a) for a in group.block.args]
    for arg in group.block.args:
        bn_uses = [u for u in arg.uses if isinstance(u.operation, nn.BatchNormOp) and u.index]
        if not bn_uses:
            continue
        shapes_seen = {_channel_shape(u.operation) for u in bn_uses}  # pyright: ignore
        if len(bn_uses) != len(list(arg.uses)) or len(shapes_seen) != 1:
            raise op_error(bn_uses[0].operation, "a batch_norm parameter in a pointwise group "
                           "must be a group input used only as a per-channel parameter")
        out[arg.index] = shapes_seen.pop()
    for op in group.block.ops:
        if isinstance(op, nn.BatchNormOp) and any(
            v.owner is not group.block for v in op.operands[1:]
        ):
            raise op_error(op, "batch_norm parameters computed inside a pointwise group "
                           "cannot be read per channel; run 'decompose' first")
    return out


def plan_group(group: GroupOp) -> _Plan:
    """Check the group, collapse its dimensions, choose the schedule."""
    ops = [op for op in group.block.ops if not isinstance(op, YieldOp)]
    _check_group(group, ops)
    terminator = group.block.last_op
    assert isinstance(terminator, YieldOp)
    results = list(terminator.values)
    in_shapes = load_shapes(group)
    out_shapes = [tensor_shape(r) for r in results]
    try:
        full = shapes.broadcast_shapes(*out_shapes)
        for s in in_shapes:
            if shapes.broadcast_shapes(s, full) != full:
                raise shapes.ShapeError(f"input {shapes.fmt(s)} is larger than the results")
    except shapes.ShapeError as err:
        raise op_error(group, f"pointwise group results do not share one shape: {err}") from None
    iter_shape, collapsed = collapse_dims(full, [*in_shapes, *out_shapes])
    inputs = [
        _Access(f"in{i}", collapsed[i], value_dtype(a)) for i, a in enumerate(group.block.args)
    ]
    outputs = [
        _Access(f"out{i}", collapsed[len(inputs) + i], value_dtype(r))
        for i, r in enumerate(results)
    ]
    return _Plan(group, ops, results, iter_shape, inputs, outputs)


def _load(access: _Access, index: str) -> str:
    """Read one element, widened to its compute type (f16 -> f32)."""
    return widen(access.dtype, f"{access.name}[{index}]")


def _store(access: _Access, value: str, value_dtype_name: str) -> str:
    """The right-hand side that narrows `value` to the stored element type."""
    if compute_type(value_dtype_name) == numba_type(access.dtype):
        return value
    return narrow(access.dtype, value)


def _op_expr(op: Operation, args: list[str]) -> str:
    """`scalar_expr`, plus the rounding an explicit cast to f16 asks for."""
    out_dtype = value_dtype(op.results[0])
    ctype = compute_type(value_dtype(op.operands[0])) if isinstance(op, nn.CmpOp) else (
        compute_type(out_dtype)
    )
    if isinstance(op, nn.BroadcastToOp):
        return args[0]
    expr = scalar_expr(op, args, ctype)
    if isinstance(op, nn.CastOp) and numba_type(out_dtype) != ctype:
        # The cast's rounding, kept in the compute type (f32 -> bf16 -> f32).
        expr = widen(out_dtype, narrow(out_dtype, args[0]))
    return expr


def _body_lines(plan: _Plan, names: dict[SSAValue, str], suffix: str = "") -> list[str]:
    """`tK = expr  # nn.op` for every op, in program order."""
    lines: list[str] = []
    for k, op in enumerate(plan.ops):
        args = [names[v] for v in op.operands]
        result = op.results[0]
        if isinstance(op, nn.BroadcastToOp):
            names[result] = args[0]  # the same element, read at a broadcast index
            continue
        if isinstance(op, nn.ConstantOp):
            literal = splat_literal(op)
            assert literal is not None
            names[result] = literal
            continue
        names[result] = f"t{k}{suffix}"
        lines.append(f"t{k}{suffix} = {_op_expr(op, args)}  # {op.name}")
    return lines


def _element_parts(
    plan: _Plan, index: str, coords: list[str], suffix: str = ""
) -> tuple[list[str], list[str], list[str]]:
    """Loads, temporaries and stores of one element at flat `index` (or at
    the element's flat index for full-shaped operands)."""
    names: dict[SSAValue, str] = {}
    loads: list[str] = []
    for arg, access in zip(plan.group.block.args, plan.inputs, strict=True):
        if access.numel == 1:
            names[arg] = f"s{arg.index}"  # hoisted above the loop
            continue
        where = index if plan.is_full(access) else broadcast_index(
            access.shape, plan.iter_shape, coords
        )
        names[arg] = f"a{arg.index}{suffix}"
        loads.append(f"a{arg.index}{suffix} = {_load(access, where)}")
    body = _body_lines(plan, names, suffix)
    stores: list[str] = []
    for value, access in zip(plan.results, plan.outputs, strict=True):
        stores.extend(_store_lines(plan, access, value, names[value], index, coords))
    return loads, body, stores


def _chunk_lines(plan: _Plan) -> list[str]:
    """The `plan.unroll` elements of this thread in chunk `c`, unrolled: every
    index, then every load, then the arithmetic, then every store. Outputs may
    alias inputs as far as the compiler knows, so a load after a store could
    not be moved up; issuing the loads together keeps `plan.unroll` requests in
    flight per thread. Elements past the end (a partial last chunk) load at a
    clamped, valid index and store nothing."""
    n = plan.numel
    tail = n % (plan.threads * plan.unroll) != 0
    index_lines: list[str] = []
    parts = []
    for e in range(plan.unroll):
        raw = f"base + {int_literal(e * plan.threads)}"
        if tail:
            index_lines += [f"i{e}_raw = {raw}", f"ok{e} = i{e}_raw < {int_literal(n)}",
                            f"i{e} = min(i{e}_raw, {int_literal(n - 1)})"]
        else:
            index_lines.append(f"i{e} = {raw}")
        coords: list[str] = []
        if plan.needs_coords():
            lines, coords = unravel(f"i{e}", plan.iter_shape, prefix=f"i{e}_")
            index_lines += lines
        loads, body, stores = _element_parts(plan, f"i{e}", coords, f"_{e}")
        if tail:
            stores = [f"if ok{e}:", *(_INDENT + line for line in stores)]
        parts.append((loads, body, stores))
    return index_lines + [line for k in range(3) for part in parts for line in part[k]]


def _store_lines(
    plan: _Plan, access: _Access, value: SSAValue, name: str, index: str, coords: list[str]
) -> list[str]:
    rhs = _store(access, name, value_dtype(value))
    if plan.is_full(access):
        return [f"{access.name}[{index}] = {rhs}"]
    # A result smaller than the iteration shape: only the threads at
    # coordinate 0 of its broadcast dimensions write it (once per element).
    first = [c for c, d, o in zip(coords, access.shape, plan.iter_shape, strict=True) if d != o]
    where = broadcast_index(access.shape, plan.iter_shape, coords)
    cond = " and ".join(f"{c} == 0" for c in first)
    return [f"if {cond}:", f"{_INDENT}{access.name}[{where}] = {rhs}"]


def _scalar_loads(plan: _Plan) -> list[str]:
    lines: list[str] = []
    for arg, access in zip(plan.group.block.args, plan.inputs, strict=True):
        if access.numel == 1:
            lines.append(f"s{arg.index} = {_load(access, '0')}")
    return lines


def _chunks(plan: _Plan) -> int:
    """Block-sized chunks of `plan.unroll` elements per thread."""
    return max(1, -(-plan.numel // (plan.threads * plan.unroll)))


def _loop_lines(plan: _Plan) -> list[str]:
    """One chunk per block: its first element and the unrolled body. Past
    `MAX_GRID_X` chunks, a loop over them (a loop whose trip count depends on
    gridDim costs a 64-bit division per thread, so it is only used there)."""
    if plan.numel == 0:
        return ["pass"]  # an empty result: one block that does nothing
    chunk = int_literal(plan.threads * plan.unroll)
    body = [*_chunk_lines(plan)]
    if _chunks(plan) <= MAX_GRID_X:
        return [f"base = cuda.blockIdx.x * {chunk} + t", *body]
    return [f"for c in range(cuda.blockIdx.x, {int_literal(_chunks(plan))}, cuda.gridDim.x):",
            f"{_INDENT}base = c * {chunk} + t", *(_INDENT + line for line in body)]


def _view_shape(access: _Access) -> tuple[int, ...]:
    return (access.numel,)  # flat: broadcast inputs are indexed by coordinates


def emit(group: GroupOp, kernel_name: str) -> KernelSource:
    """Generate the kernel of pointwise `group`, named `kernel_name`, under
    its `#fusion.pointwise` schedule."""
    if has_transposes(group):  # transposed operands: their own emitter
        return pointwise_transpose.emit(group, kernel_name)
    schedule = group_schedule(group, PointwiseSchedule)
    plan = plan_group(group)
    plan.unroll = schedule.int_field("elements_per_thread")
    plan.threads = schedule.int_field("block")
    grid, block = (min(_chunks(plan), MAX_GRID_X), 1, 1), (plan.threads, 1, 1)
    per_thread = f"{plan.unroll} elements per thread, {plan.threads} apart"
    notes = [f"iteration shape {shapes.fmt(plan.iter_shape)} (dimensions collapsed)"]
    header = kernel_header(group, plan.ops, launch_text(grid, block, per_thread), notes)
    params = [a.name for a in (*plan.inputs, *plan.outputs)]
    body = [
        "t = cuda.threadIdx.x",
        *_scalar_loads(plan),
        *_loop_lines(plan),
    ]
    text = "\n".join([
        *header,
        "@cuda.jit",
        f"def {kernel_name}({', '.join(params)}):",
        *(_INDENT + line for line in body),
    ])
    kernel_params = [
        KernelParam("input", i, _view_shape(a)) for i, a in enumerate(plan.inputs)
    ] + [KernelParam("output", i, _view_shape(a)) for i, a in enumerate(plan.outputs)]
    return KernelSource(
        kernel_name, text + "\n", grid, block, kernel_params,
        notes=[f"pointwise, {per_thread}"],
    )

