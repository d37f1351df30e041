"""The emitter of pointwise groups that read transposed operands (and
slices and reshapes of group inputs, read as strided views on the flat
schedule: `analysis/view_operands.py`).

A `nn.transpose` of a group input inside a pointwise group is read in place:
element `i` of its result is element `perm`-permuted `i` of the input. How
depends on the group's `#fusion.pointwise<..., tile = T>` schedule:

- `tile = 0`: the flat schedule (`block` threads, `elements_per_thread`
  elements each, `block` apart); every input is read at the element's
  unravelled coordinates, a transposed one at its strided index. Coalesced
  when the permutation keeps the innermost axis in place.
- `tile = T`: one `T x T` tile of outputs per block, spanning output axis `A`
  (along which the transposed operands are contiguous,
  `analysis/transposed_operands.py`) and the innermost axis `I`; the other
  axes go to gridDim.z. The block is `T x (block / T)` threads. First every
  thread loads `T * block`-th rows of each transposed operand's tile with
  `threadIdx.x` walking axis `A` (coalesced in the operand), into a
  `T x (T + 1)` shared array (the pad keeps both phases free of bank
  conflicts); after a barrier it computes and stores its outputs with
  `threadIdx.x` walking axis `I` (coalesced in the results), reading other
  operands directly.

```mlir
%r = fusion.group (%x, %y) {name = "g0", kind = "pointwise",
    schedule = #fusion.pointwise<elements_per_thread = 4, block = 256, tile = 32>}
    : (tensor<33x47xf32>, tensor<47x33xf32>) -> tensor<47x33xf32> {
^bb0(%xa: tensor<33x47xf32>, %ya: tensor<47x33xf32>):
  %t = nn.transpose %xa {perm = [1, 0]} : (tensor<33x47xf32>) -> tensor<47x33xf32>
  %s = nn.add %t, %ya : (tensor<47x33xf32>, tensor<47x33xf32>) -> tensor<47x33xf32>
  fusion.yield %s : tensor<47x33xf32>
}
```

Tails are clamped: a thread past the edge loads a valid element and stores
nothing. Half precision is staged as float32.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.ir import BlockArgument, Operation, SSAValue

from fusec.analysis.diagnostics import op_error
from fusec.analysis.op_kinds import op_kind
from fusec.analysis.pointwise_registers import PARAM_REGISTERS
from fusec.analysis.strided_view import StridedView
from fusec.analysis.transposed_operands import (
    swapped_axis,
    tile_axes,
    transpose_refusal,
    transposes,
)
from fusec.analysis.view_operands import (
    CHAINED_VIEWS,
    FOLDED_VIEWS,
    extra_reads,
    operand_view,
    view_refusal,
)
from fusec.codegen.group_body import (
    POINT_KINDS,
    GroupBody,
    PointEvaluator,
    compute_type,
    load_expr,
    store_lines,
)
from fusec.codegen.kernel_source import (
    KernelSource,
    broadcast_index,
    int_literal,
    kernel_header,
    launch_text,
    unravel,
)
from fusec.codegen.launch_grid import block_index_lines
from fusec.codegen.pointwise_index import ElementIndex, index_type
from fusec.codegen.schedule_input import group_schedule
from fusec.dialects import nn
from fusec.dialects.element_types import numba_width
from fusec.dialects.fusion import GroupOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.schedule import PointwiseSchedule
from fusec.dialects.shapes import Shape, ShapeError, broadcast_shapes, fmt, numel

_INDENT = "    "

TRANSPOSE_BASE = 13  # thread index, chunk loop, bounds, 64-bit flat indices
TRANSPOSE_ARRAY_REGISTERS_PER_ELEMENT = 1.625  # a value in flight plus its (64-bit) address
"""This kernel's own constants: it keeps 64-bit indices and per-element
unravelling, so the flat pointwise kernel's refit (32-bit literal-divisor
indices, `analysis/pointwise_registers.py`) does not describe it; these are
the values its fit below was made with."""
FLAT_COORD_REGISTERS = 1
"""Registers per iteration axis of the flat kernel's unravelled coordinates.
Fitted to `ptxas -arch=sm_90 -v` (2026-12-01) on `relu(transpose(x) + y)`
over 2-D to 4-D shapes, f32/f16/bf16: the tiled kernel needs no more than
the flat one's arrays in flight (31-32 registers, estimate 33), its tile
origins and row offsets fold into the addresses."""

# Numba element types a shared tile may hold; narrower integers widen to int32.
_TILE_TYPES = ("float32", "float64", "int32", "int64", "boolean")


def has_views(group: Operation) -> bool:
    """Whether pointwise `group` reads an operand through a transpose, slice
    or reshape (this module emits it)."""
    return any(isinstance(op, FOLDED_VIEWS) for op in group.regions[0].block.ops)


@dataclass
class _Plan:
    """The group's body, iteration shape and tiling, decided before any text."""

    body: GroupBody
    shape: Shape
    tile: int
    threads: int
    unroll: int
    axes: tuple[int, int] | None  # (swapped axis A, innermost axis I) when tiled
    tiled: dict[tuple[BlockArgument, tuple[int, ...]], int] = field(
        default_factory=dict[tuple[BlockArgument, tuple[int, ...]], int])

    @property
    def rows(self) -> int:
        """Threads along y: rows of the tile one pass covers."""
        return self.threads // self.tile


def _check(body: GroupBody, shape: Shape) -> None:
    for op in body.ops:
        if isinstance(op, nn.TransposeOp):
            if not isinstance(op.operands[0], BlockArgument):
                raise op_error(op, "a transpose in a pointwise group must read a group input")
        elif isinstance(op, CHAINED_VIEWS):
            continue
        elif isinstance(op, nn.BatchNormOp) or not (
                isinstance(op, nn.ConstantOp) or op_kind(op) in POINT_KINDS):
            raise op_error(op, f"'{op.name}' cannot be generated in a pointwise group with "
                           "transposed operands")
    reason = transpose_refusal(body.ops, shape) or view_refusal(body.ops, shape)
    if reason is not None:
        raise op_error(body.group, f"cannot generate this pointwise group: {reason}")


def plan_group(group: GroupOp, schedule: PointwiseSchedule) -> _Plan:
    """Check the group and decide the iteration shape and tiling."""
    body = GroupBody.of(group)
    try:
        shape = broadcast_shapes(*(tensor_shape(v) for v in body.outputs))
    except ShapeError as err:
        raise op_error(group, f"pointwise group results do not share one shape: {err}") from None
    _check(body, shape)
    tile, threads = schedule.int_field("tile"), schedule.int_field("block")
    axes = tile_axes(body.ops, shape) if tile and numel(shape) else None
    if tile and numel(shape) and axes is None:
        raise op_error(group, f"schedule tile = {tile}, but no transposed operand of "
                       f"{fmt(shape)} moves the innermost axis")
    if tile and (threads % tile or tile % (threads // tile or 1) or threads < tile):
        raise op_error(group, f"schedule block = {threads} does not split a {tile}x{tile} tile "
                       "into rows of whole warps")
    plan = _Plan(body, shape, tile, threads, schedule.int_field("elements_per_thread"), axes)
    if axes is not None:
        for op in transposes(body.ops):
            key = (op.operands[0], tuple(op.perm))
            if _is_tiled(plan, op) and key not in plan.tiled:
                plan.tiled[key] = len(plan.tiled)  # type: ignore[index]
    return plan


def _is_tiled(plan: _Plan, op: nn.TransposeOp) -> bool:
    return (plan.axes is not None and tensor_shape(op.results[0]) == plan.shape
            and swapped_axis(op) == plan.axes[0])


def _strided_index(op: nn.TransposeOp, coords: Sequence[str]) -> str:
    """Index into the transpose's operand of the result element at `coords`
    (iteration coordinates, right-aligned against the result)."""
    view = StridedView.contiguous(op.operand_shape()).transpose(op.perm)
    return view.index(list(coords[len(coords) - len(view.shape):]))


def _view_load(body: GroupBody, op: Operation, coords: Sequence[str],
               lit: Callable[[int], str]) -> str:
    """The load of the element at `coords` of layout op `op`'s result, read
    from the group input at the root of its chain (only the coordinates the
    view varies in enter the index)."""
    found = operand_view(op, set(body.ops))
    if isinstance(found, str):
        raise op_error(op, f"cannot generate this pointwise group: {found}")
    root, view = found
    terms = [lit(view.offset)] if view.offset else []
    for c, n, stride in zip(coords[len(coords) - len(view.shape):], view.shape, view.strides,
                            strict=True):
        if n != 1 and stride != 0:  # only the dimensions the view varies in
            terms.append(c if stride == 1 else f"{c} * {lit(stride)}")
    return load_expr(body, root, " + ".join(terms) or "0")  # type: ignore[arg-type]


def _read_directly(body: GroupBody, op: Operation) -> bool:
    """Whether the kernel loads `op`'s result (something other than another
    chained layout op reads it, or it is a result of the group)."""
    return op.results[0] in body.outputs or any(
        not isinstance(u.operation, CHAINED_VIEWS) for u in op.results[0].uses)


def _tile_type(arg: BlockArgument) -> str:
    ctype = compute_type(arg)
    return ctype if ctype in _TILE_TYPES else "int32"


def _element(plan: _Plan, coords: list[str], suffix: str, tile_reads: dict[int, str],
             lit: Callable[[int], str] = int_literal) -> tuple[list[str], list[str], list[str]]:
    """Loads, arithmetic and stores of the element at `coords`; tiled
    transposes are the given tile reads; `lit` writes the view index's
    literals (typed as the coordinates are, so the index stays 32-bit)."""
    body, loads = plan.body, []
    bound: dict[SSAValue, str] = {}
    for k, op in enumerate(body.ops):
        if not isinstance(op, FOLDED_VIEWS) or not _read_directly(body, op):
            continue
        if isinstance(op, nn.TransposeOp) and _is_tiled(plan, op):
            key = (op.operands[0], tuple(op.perm))
            bound[op.results[0]] = tile_reads[plan.tiled[key]]  # type: ignore[index]
            continue
        name = f"tp{k}{suffix}"
        loads.append(f"{name} = {_view_load(body, op, coords, lit)}")
        bound[op.results[0]] = name
    for arg in body.args:
        if any(not isinstance(u.operation, FOLDED_VIEWS) for u in arg.uses):
            name = f"a{arg.index}{suffix}"
            index = broadcast_index(tensor_shape(arg), plan.shape, coords)
            loads.append(f"{name} = {load_expr(body, arg, index)}")
            bound[arg] = name
    ev = PointEvaluator(body, plan.shape, coords, bound, suffix=suffix)
    values = [ev.value(v) for v in body.outputs]
    stores = [line for k, (v, val) in enumerate(zip(body.outputs, values, strict=True))
              for line in store_lines(k, v, val, plan.shape, coords)]
    return loads, ev.take_lines(), stores


def _flat_lines(plan: _Plan) -> list[str]:
    """tile = 0: `unroll` elements per thread, `threads` apart, each at its
    unravelled coordinates; all loads, then the arithmetic, then the stores."""
    n = numel(plan.shape)
    if n == 0:
        return ["pass"]
    chunk = plan.threads * plan.unroll
    itype = index_type(n)
    lines = [f"base = cuda.blockIdx.x * {int_literal(chunk)} + cuda.threadIdx.x"]
    parts = []
    for e in range(plan.unroll):
        at = ElementIndex(f"i{e}", plan.shape, itype, str(e))
        lines += [f"i{e}_raw = base + {int_literal(e * plan.threads)}",
                  f"ok{e} = i{e}_raw < {int_literal(n)}",
                  f"i{e} = {itype}(min(i{e}_raw, {int_literal(n - 1)}))"]
        coords = [at.run_coord(d, d) if size != 1 else at.lit(0)
                  for d, size in enumerate(plan.shape)]
        lines += at.coord_lines
        loads, arith, stores = _element(plan, coords, f"_{e}", {}, at.lit)
        parts.append((loads, arith, [f"if ok{e}:", *(_INDENT + s for s in stores)]))
    return lines + [line for k in range(3) for part in parts for line in part[k]]


def _coords(plan: _Plan, along_a: str, along_i: str) -> list[str]:
    assert plan.axes is not None
    a, i = plan.axes
    return [along_a if d == a else along_i if d == i else f"b{d}" for d in range(len(plan.shape))]


def _clamped(plan: _Plan, name: str, expr: str, extent: int, lines: list[str]) -> str:
    """`name` = `expr` kept inside `extent` (a tile past the edge reads a
    valid element); a plain assignment when tiles divide the extent."""
    bounded = f"min({expr}, {int_literal(extent - 1)})" if extent % plan.tile else expr
    lines.append(f"{name} = {bounded}")
    return name


def _load_phase(plan: _Plan) -> list[str]:
    """Each tiled operand's tile, `threadIdx.x` walking axis A (the
    operand's contiguous axis): tile[i - n0][a - m0]."""
    assert plan.axes is not None
    a, i = plan.axes
    lines: list[str] = []
    la = _clamped(plan, "la", "m0 + tx", plan.shape[a], lines)
    loads: list[str] = []
    writes: list[str] = []
    ops = {(op.operands[0], tuple(op.perm)): op for op in transposes(plan.body.ops)}
    for r in range(plan.tile // plan.rows):
        row = f"ty + {int_literal(r * plan.rows)}" if r else "ty"
        li = _clamped(plan, f"li{r}", f"n0 + {row}", plan.shape[i], lines)
        coords = _coords(plan, la, li)
        for key, j in plan.tiled.items():
            op = ops[key]
            src = load_expr(plan.body, key[0], _strided_index(op, coords))
            loads.append(f"x{j}_{r} = {src}")
            writes.append(f"tile{j}[{row}, tx] = x{j}_{r}")
    return [*lines, *loads, *writes, "cuda.syncthreads()"]


def _compute_phase(plan: _Plan) -> list[str]:
    """Outputs with `threadIdx.x` walking the innermost axis I."""
    assert plan.axes is not None
    a, i = plan.axes
    tail = plan.shape[a] % plan.tile or plan.shape[i] % plan.tile
    lines: list[str] = ["ci_raw = n0 + tx"]
    ci = _clamped(plan, "ci", "ci_raw", plan.shape[i], lines)
    parts = []
    for r in range(plan.tile // plan.rows):
        row = f"ty + {int_literal(r * plan.rows)}" if r else "ty"
        lines.append(f"ca{r}_raw = m0 + {row}")
        ca = _clamped(plan, f"ca{r}", f"ca{r}_raw", plan.shape[a], lines)
        reads = {j: f"tile{j}[tx, {row}]" for j in plan.tiled.values()}
        loads, arith, stores = _element(plan, _coords(plan, ca, ci), f"_{r}", reads)
        if tail:
            ok = (f"ca{r}_raw < {int_literal(plan.shape[a])} and "
                  f"ci_raw < {int_literal(plan.shape[i])}")
            stores = [f"if {ok}:", *(_INDENT + s for s in stores)]
        parts.append((loads, arith, stores))
    return lines + [line for k in range(3) for part in parts for line in part[k]]


def _tiled_lines(plan: _Plan) -> tuple[list[str], tuple[int, int, int], frozenset[str]]:
    """The tiled kernel's body, its grid and the grid axes it loops over."""
    assert plan.axes is not None
    a, i = plan.axes
    batch_axes = [d for d in range(len(plan.shape)) if d not in (a, i)]
    batch = numel(tuple(plan.shape[d] for d in batch_axes))
    unravel_lines, names = unravel("bz", [plan.shape[d] for d in batch_axes], prefix="bb")
    batch_lines = unravel_lines + [f"b{d} = {n}" for d, n in zip(batch_axes, names, strict=True)]
    inner = ["m0 = by * " + int_literal(plan.tile), *batch_lines,
             *_load_phase(plan), *_compute_phase(plan)]
    grid = (-(-plan.shape[i] // plan.tile), -(-plan.shape[a] // plan.tile), max(1, batch))
    body, looped = block_index_lines([("by", "y", grid[1]), ("bz", "z", grid[2])], inner,
                                     reuses_shared=True)
    tiles = [f"tile{j} = cuda.shared.array(({plan.tile}, {plan.tile + 1}), "
             f"{_tile_type(key[0])})" for key, j in plan.tiled.items()]
    head = ["tx = cuda.threadIdx.x", "ty = cuda.threadIdx.y", *tiles,
            f"n0 = cuda.blockIdx.x * {int_literal(plan.tile)}"]
    return head + body, grid, looped


def tile_shared_bytes(plan: _Plan) -> int:
    """Shared memory of the tiled kernel: one padded tile per tiled operand."""
    return sum(plan.tile * (plan.tile + 1) * numba_width(_tile_type(key[0]))
               for key in plan.tiled)


def emit(group: GroupOp, kernel_name: str) -> KernelSource:
    """Generate the kernel of pointwise `group` (with transposed operands)
    under its `#fusion.pointwise` schedule."""
    schedule = group_schedule(group, PointwiseSchedule)
    plan = plan_group(group, schedule)
    looped: frozenset[str] = frozenset()
    if plan.axes is not None:
        body, grid, looped = _tiled_lines(plan)
        block = (plan.tile, plan.rows, 1)
        per_thread = (f"{plan.tile}x{plan.tile} output tile per block, transposed operands "
                      f"staged in shared memory, {plan.tile // plan.rows} elements per thread")
    else:
        body = _flat_lines(plan)
        grid = (max(1, -(-numel(plan.shape) // (plan.threads * plan.unroll))), 1, 1)
        block = (plan.threads, 1, 1)
        per_thread = (f"{plan.unroll} elements per thread, {plan.threads} apart, transposed "
                      "operands read at strided indices")
    notes = [f"iteration shape {fmt(plan.shape)}"]
    header = kernel_header(group, plan.body.ops, launch_text(grid, block, per_thread), notes)
    text = "\n".join([*header, "@cuda.jit", f"def {kernel_name}({plan.body.signature()}):",
                      *(_INDENT + line for line in body)])
    return KernelSource(kernel_name, text + "\n", grid, block, plan.body.params(),
                        shared_bytes=tile_shared_bytes(plan), notes=[f"pointwise, {per_thread}"],
                        grid_loops=looped)


def register_parts(group: GroupOp, schedule: PointwiseSchedule) -> list[tuple[str, float]]:
    """The register model's parts for this kernel: base, arrays in flight
    per element a thread handles (the tiled kernel: `tile * tile / block`
    rows), scalars, and the flat kernel's coordinates."""
    plan = plan_group(group, schedule)
    per_thread = plan.tile // plan.rows if plan.axes is not None else plan.unroll
    arrays = sum(1 for a in plan.body.args if numel(tensor_shape(a)) != 1) + len(
        plan.body.outputs) + extra_reads(plan.body.ops, plan.body.args)
    scalars = len(plan.body.args) - sum(1 for a in plan.body.args if numel(tensor_shape(a)) != 1)
    coords = FLAT_COORD_REGISTERS * len(plan.shape) if plan.axes is None else 0
    return [("base", TRANSPOSE_BASE),
            ("arrays in flight", TRANSPOSE_ARRAY_REGISTERS_PER_ELEMENT * per_thread * arrays),
            ("scalars", PARAM_REGISTERS * scalars), ("coordinates", coords)]
