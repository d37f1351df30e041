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
the element's coordinates (`pointwise_index.py`: uint32 below 2^31
elements, literal divisors, only the dimensions the operand varies in),
scalars once per thread. A partial last chunk loads at clamped indices and
stores only the elements that exist. Half precision is loaded into float32,
computed there and rounded on store; an explicit cast to f16 inside the
group rounds where the program says so. When a half array is contiguous
along the innermost extent and that extent and E allow, a thread's E
elements are E / V accesses of V = 4 (or 2) consecutive elements, `B`
accesses apart, and half arrays move one 8-byte (4-byte) word per access
(`wide_access.py`), behind a test that every such array is aligned.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.ir import Operation, SSAValue

from fusec.analysis.collapsed_dims import collapse_dims
from fusec.analysis.device_dtypes import UnsupportedTypeError, compute_type, numba_type, value_dtype
from fusec.analysis.diagnostics import op_error
from fusec.analysis.index_types import index_type
from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.analysis.targets import Target
from fusec.codegen import pointwise_transpose
from fusec.codegen.kernel_source import (
    KernelParam,
    KernelSource,
    float_literal,
    int_literal,
    kernel_header,
    launch_text,
    narrow,
    scalar_expr,
    widen,
)
from fusec.codegen.pointwise_index import ElementIndex
from fusec.codegen.pointwise_transpose import has_views
from fusec.codegen.schedule_input import group_schedule
from fusec.codegen.wide_access import (
    HALF_ACCESS_BYTES,
    WORD_TYPES,
    lane_value,
    pack_values,
    wide_load,
    wide_store,
)
from fusec.dialects import nn, shapes
from fusec.dialects.element_types import of_device_dtype
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.nn_base import splat_value, tensor_shape
from fusec.dialects.schedule import PointwiseSchedule

# CUDA's limit on gridDim.x: one block per chunk up to it, a grid-stride loop
# over chunks beyond.

_POINTWISE_KINDS = (OpKind.ELEMENTWISE, OpKind.BROADCAST)
_INDENT = "    "


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
    vector: int = 1  # consecutive elements per access (halves read wide)

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


def vector_width(plan: _Plan) -> int:
    """Halves per wide access: the most (up to `HALF_ACCESS_BYTES`) that
    divide both the elements per thread and the innermost extent (so the
    lanes of an access share every coordinate but the last), when some
    f16/bf16 array is full along that extent; else 1."""
    if not plan.iter_shape or not any(
        _is_half(a) and a.shape[-1] == plan.iter_shape[-1] and a.numel > 1
        for a in (*plan.inputs, *plan.outputs)
    ):
        return 1
    lanes = HALF_ACCESS_BYTES // 2
    while lanes > 1 and (plan.unroll % lanes or plan.iter_shape[-1] % lanes):
        lanes //= 2
    return lanes


def _is_half(access: _Access) -> bool:
    return of_device_dtype(access.dtype).is_half


def _along_inner(plan: _Plan, access: _Access) -> bool:
    """Whether `access` varies along the innermost extent (its lanes are
    consecutive elements); true of everything in a 0-d iteration space."""
    return not plan.iter_shape or access.shape[-1] == plan.iter_shape[-1]


def _is_wide(plan: _Plan, access: _Access) -> bool:
    """Whether `access` is read or written wide: a half array, contiguous
    along the innermost extent (its lanes are consecutive elements)."""
    return (plan.vector > 1 and _is_half(access) and access.numel > 1
            and _along_inner(plan, access))


def wide_arrays(plan: _Plan) -> list[str]:
    """The parameters moved in words (`plan.vector` lanes per access)."""
    return [a.name for a in (*plan.inputs, *plan.outputs) if _is_wide(plan, a)]


def _access_index(plan: _Plan, access: _Access, at: ElementIndex, k: str) -> str:
    """The index of lane 0 of an access into `access` (`k`: its flat index)."""
    return k if plan.is_full(access) else at.operand(access.shape)


def _lane(index: str, lane: int, itype: str) -> str:
    """Lane `lane` of an access at `index` (typed: numba makes a float of
    uint64 + int64)."""
    return index if lane == 0 else f"{index} + {itype}({lane})"


def _access_loads(
    plan: _Plan, at: ElementIndex, k: str, a: int, wide: bool
) -> tuple[list[str], list[dict[SSAValue, str]]]:
    """The loads of access `a` and each lane's names of the group inputs."""
    lanes = plan.vector
    names: list[dict[SSAValue, str]] = [{} for _ in range(lanes)]
    loads: list[str] = []
    for arg, access in zip(plan.group.block.args, plan.inputs, strict=True):
        i = arg.index
        if access.numel == 1:
            for n in names:
                n[arg] = f"s{i}"  # hoisted above the loop
            continue
        index = _access_index(plan, access, at, k)
        if not _along_inner(plan, access):  # the same element for every lane
            loads.append(f"a{i}_{a} = {_load(access, index)}")
            for n in names:
                n[arg] = f"a{i}_{a}"
            continue
        if wide and _is_wide(plan, access):
            word_type = WORD_TYPES[lanes]
            element = of_device_dtype(access.dtype).name
            loads.append(f"v{i}_{a} = {wide_load(word_type, access.name, index)}")
            loads += [f"a{i}_{a}_{j} = {lane_value(element, word_type, f'v{i}_{a}', j)}"
                      for j in range(lanes)]
        else:
            loads += [f"a{i}_{a}_{j} = {_load(access, _lane(index, j, at.itype))}"
                      for j in range(lanes)]
        for j, n in enumerate(names):
            n[arg] = f"a{i}_{a}_{j}"
    return loads, names


def _access_stores(
    plan: _Plan, at: ElementIndex, k: str, names: list[dict[SSAValue, str]], wide: bool
) -> list[str]:
    """The stores of one access: wide, per lane, or (a result smaller than the
    iteration shape) only by the lanes at coordinate 0 of its broadcast
    dimensions."""
    lines: list[str] = []
    for value, access in zip(plan.results, plan.outputs, strict=True):
        rhs = [_store(access, n[value], value_dtype(value)) for n in names]
        index = _access_index(plan, access, at, k)
        if plan.is_full(access) and wide and _is_wide(plan, access):
            word_type = WORD_TYPES[plan.vector]
            element = of_device_dtype(access.dtype).name
            word = pack_values(element, word_type, [n[value] for n in names])
            lines.append(wide_store(word_type, access.name, index, word))
            continue
        per_lane = _along_inner(plan, access)
        stores = [f"{access.name}[{_lane(index, j, at.itype)}] = {r}"
                  for j, r in enumerate(rhs if per_lane else rhs[:1])]
        if plan.is_full(access):
            lines += stores
        else:
            lines += [f"if {at.first_along_broadcast(access.shape)}:",
                      *(_INDENT + s for s in stores)]
    return lines


def _chunk_lines(plan: _Plan, wide: bool) -> list[str]:
    """This thread's accesses of the chunk: `plan.unroll / plan.vector`
    accesses of `plan.vector` consecutive elements each, `plan.threads`
    accesses apart. Every index, then every load, then the arithmetic, then
    every store: outputs may alias inputs as far as the compiler knows, so a
    load after a store could not be moved up; issuing the loads together keeps
    the accesses in flight. Accesses past the end (a partial last chunk) load
    at a clamped, valid index and store nothing."""
    lanes, itype = plan.vector, index_type(plan.numel)
    accesses, words = plan.unroll // lanes, plan.numel // lanes
    tail = words % (plan.threads * accesses) != 0
    index_lines: list[str] = []
    parts = []
    for a in range(accesses):
        raw = f"base + {itype}({int_literal(a * plan.threads)})"
        if tail:
            index_lines += [f"w{a}_raw = {raw}", f"ok{a} = w{a}_raw < {itype}({words})",
                            f"w{a} = min(w{a}_raw, {itype}({words - 1}))"]
        else:
            index_lines.append(f"w{a} = {raw}")
        k = f"w{a}" if lanes == 1 else f"k{a}"
        if lanes > 1:
            index_lines.append(f"k{a} = w{a} * {itype}({lanes})")
        at = ElementIndex(f"j{a}", plan.iter_shape, itype, str(a))
        loads, names = _access_loads(plan, at, k, a, wide)
        body = [line for j, n in enumerate(names) for line in _body_lines(plan, n, f"_{a}_{j}")]
        stores = _access_stores(plan, at, k, names, wide)
        if tail:
            stores = [f"if ok{a}:", *(_INDENT + line for line in stores)]
        if at.coord_lines:
            # Coordinates in the index type itself (uint32: one 32-bit multiply
            # per constant division); `k` stays wide for the full-shaped loads.
            index_lines += [f"j{a} = {itype}({k})", *at.coord_lines]
        parts.append((loads, body, stores))
    return index_lines + [line for i in range(3) for part in parts for line in part[i]]


def _scalar_loads(plan: _Plan) -> list[str]:
    lines: list[str] = []
    for arg, access in zip(plan.group.block.args, plan.inputs, strict=True):
        if access.numel == 1:
            lines.append(f"s{arg.index} = {_load(access, '0')}")
    return lines


def _chunks(plan: _Plan) -> int:
    """Block-sized chunks of `plan.unroll` elements per thread."""
    return max(1, -(-plan.numel // (plan.threads * plan.unroll)))


def _body(plan: _Plan) -> list[str]:
    """The chunk's accesses; when some array is accessed wide, behind a
    test that every such array is aligned to the access (else per element)."""
    wide = wide_arrays(plan)
    if not wide:
        return _chunk_lines(plan, wide=False)
    nbytes = 2 * plan.vector
    test = " and ".join(f"is_aligned({name}, {nbytes})" for name in wide)
    return [f"if {test}:", *(_INDENT + line for line in _chunk_lines(plan, wide=True)),
            "else:", *(_INDENT + line for line in _chunk_lines(plan, wide=False))]


def _loop_lines(plan: _Plan, max_grid_x: int) -> list[str]:
    """One chunk per block: its first access (`base`, in accesses) and the
    unrolled body. Past `max_grid_x` chunks (the target's), a loop over them (a loop whose
    trip count depends on gridDim costs a 64-bit division per thread, so it
    is only used there)."""
    if plan.numel == 0:
        return ["pass"]  # an empty result: one block that does nothing
    itype = index_type(plan.numel)
    chunk = f"{itype}({int_literal(plan.threads * plan.unroll // plan.vector)})"
    body = _body(plan)
    if _chunks(plan) <= max_grid_x:
        return [f"base = {itype}({itype}(cuda.blockIdx.x) * {chunk} + {itype}(t))", *body]
    return [f"for c in range(cuda.blockIdx.x, {int_literal(_chunks(plan))}, cuda.gridDim.x):",
            f"{_INDENT}base = {itype}(c) * {chunk} + {itype}(t)",
            *(_INDENT + line for line in body)]


def _view_shape(access: _Access) -> tuple[int, ...]:
    return (access.numel,)  # flat: broadcast inputs are indexed by coordinates


def emit(group: GroupOp, kernel_name: str, target: Target) -> KernelSource:
    """Generate the kernel of pointwise `group`, named `kernel_name`, under
    its `#fusion.pointwise` schedule, within `target`'s grid."""
    if has_views(group):  # operands read through layout ops: their own emitter
        return pointwise_transpose.emit(group, kernel_name)
    schedule = group_schedule(group, PointwiseSchedule)
    plan = plan_group(group)
    plan.unroll = schedule.int_field("elements_per_thread")
    plan.threads = schedule.int_field("block")
    plan.vector = vector_width(plan)
    grid, block = (min(_chunks(plan), target.max_grid_x), 1, 1), (plan.threads, 1, 1)
    per_thread = f"{plan.unroll} elements per thread, {plan.threads} apart"
    notes = [f"iteration shape {shapes.fmt(plan.iter_shape)} (dimensions collapsed)"]
    header = kernel_header(group, plan.ops, launch_text(grid, block, per_thread), notes)
    params = [a.name for a in (*plan.inputs, *plan.outputs)]
    body = [
        "t = cuda.threadIdx.x",
        *_scalar_loads(plan),
        *_loop_lines(plan, target.max_grid_x),
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

