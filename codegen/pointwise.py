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

import numpy as np
from xdsl.ir import Operation, SSAValue

from fusec.analysis.device_dtypes import compute_type, numba_type, value_dtype
from fusec.analysis.index_types import index_type
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
from fusec.codegen.wide_access import (
    WORD_TYPES,
    alignment_tests,
    lane_value,
    pack_values,
    wide_load,
    wide_store,
)
from fusec.dialects import nn, shapes
from fusec.dialects.element_types import of_device_dtype
from fusec.dialects.nn_base import splat_value
from fusec.scheduling.group_plan import GroupPlan
from fusec.scheduling.pointwise_plan import (
    PointwiseAccess,
    PointwisePlan,
    along_inner,
    is_wide,
    wide_arrays,
)
from fusec.scheduling.transposed_plan import TransposedPlan

# CUDA's limit on gridDim.x: one block per chunk up to it, a grid-stride loop
# over chunks beyond.

_INDENT = "    "


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


def _load(access: PointwiseAccess, index: str) -> str:
    """Read one element, widened to its compute type (f16 -> f32)."""
    return widen(access.dtype, f"{access.name}[{index}]")


def _store(access: PointwiseAccess, value: str, value_dtype_name: str) -> str:
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


def _body_lines(plan: PointwisePlan, names: dict[SSAValue, str], suffix: str = "") -> list[str]:
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


def _access_index(plan: PointwisePlan, access: PointwiseAccess, at: ElementIndex, k: str) -> str:
    """The index of lane 0 of an access into `access` (`k`: its flat index)."""
    return k if plan.is_full(access) else at.operand(access.shape)


def _lane(index: str, lane: int, itype: str) -> str:
    """Lane `lane` of an access at `index` (typed: numba makes a float of
    uint64 + int64)."""
    return index if lane == 0 else f"{index} + {itype}({lane})"


def _access_loads(
    plan: PointwisePlan, at: ElementIndex, k: str, a: int, wide: bool
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
        if not along_inner(plan, access):  # the same element for every lane
            loads.append(f"a{i}_{a} = {_load(access, index)}")
            for n in names:
                n[arg] = f"a{i}_{a}"
            continue
        if wide and is_wide(plan, access):
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
    plan: PointwisePlan, at: ElementIndex, k: str, names: list[dict[SSAValue, str]], wide: bool
) -> list[str]:
    """The stores of one access: wide, per lane, or (a result smaller than the
    iteration shape) only by the lanes at coordinate 0 of its broadcast
    dimensions."""
    lines: list[str] = []
    for value, access in zip(plan.results, plan.outputs, strict=True):
        rhs = [_store(access, n[value], value_dtype(value)) for n in names]
        index = _access_index(plan, access, at, k)
        if plan.is_full(access) and wide and is_wide(plan, access):
            word_type = WORD_TYPES[plan.vector]
            element = of_device_dtype(access.dtype).name
            word = pack_values(element, word_type, [n[value] for n in names])
            lines.append(wide_store(word_type, access.name, index, word))
            continue
        per_lane = along_inner(plan, access)
        stores = [f"{access.name}[{_lane(index, j, at.itype)}] = {r}"
                  for j, r in enumerate(rhs if per_lane else rhs[:1])]
        if plan.is_full(access):
            lines += stores
        else:
            lines += [f"if {at.first_along_broadcast(access.shape)}:",
                      *(_INDENT + s for s in stores)]
    return lines


def _chunk_lines(plan: PointwisePlan, wide: bool) -> list[str]:
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


def _scalar_loads(plan: PointwisePlan) -> list[str]:
    lines: list[str] = []
    for arg, access in zip(plan.group.block.args, plan.inputs, strict=True):
        if access.numel == 1:
            lines.append(f"s{arg.index} = {_load(access, '0')}")
    return lines


def _chunks(plan: PointwisePlan) -> int:
    """Block-sized chunks of `plan.unroll` elements per thread."""
    return max(1, -(-plan.numel // (plan.threads * plan.unroll)))


def _body(plan: PointwisePlan) -> list[str]:
    """The chunk's accesses; when some array is accessed wide and the
    runtime's alignment does not cover the access, behind a test that every
    such array is aligned to it (else per element)."""
    wide = wide_arrays(plan)
    if not wide:
        return _chunk_lines(plan, wide=False)
    tests = alignment_tests((name, 2 * plan.vector) for name in wide)
    if not tests:
        return _chunk_lines(plan, wide=True)
    return [f"if {' and '.join(tests)}:",
            *(_INDENT + line for line in _chunk_lines(plan, wide=True)),
            "else:", *(_INDENT + line for line in _chunk_lines(plan, wide=False))]


def _loop_lines(plan: PointwisePlan, max_grid_x: int) -> list[str]:
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


def _view_shape(access: PointwiseAccess) -> tuple[int, ...]:
    return (access.numel,)  # flat: broadcast inputs are indexed by coordinates


def emit(group_plan: GroupPlan, kernel_name: str, target: Target) -> KernelSource:
    """Generate the kernel of a pointwise group, named `kernel_name`, as its
    plan (`scheduling/pointwise_group_plan.py`) says, within `target`'s grid."""
    if isinstance(group_plan.detail, TransposedPlan):  # operands read through layout ops
        return pointwise_transpose.emit(group_plan.group, group_plan.detail, kernel_name)
    plan = group_plan.detail_of(PointwisePlan)
    group = group_plan.group
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

