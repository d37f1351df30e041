"""The emitter of pointwise groups that read transposed operands (and
slices and reshapes of group inputs, read as strided views on the flat
schedule: `analysis/view_operands.py`).

A `nn.transpose` of a group input inside a pointwise group is read in place:
element `i` of its result is element `perm`-permuted `i` of the input (a
transpose of a chain of slices and reshapes, at the chain's composed strided
view: `analysis/view_operands.py`). How
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
  operands directly. Neighbouring axes that every access steps across alike
  merge first, and the index arithmetic is per thread, not per element
  (`codegen/pointwise_tile.py` writes this kernel).

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

from xdsl.ir import Operation, SSAValue

from fusec.analysis.concat_operands import concat_pieces
from fusec.analysis.diagnostics import op_error
from fusec.analysis.group_body import POINT_KINDS, GroupBody
from fusec.analysis.in_place_reads import pointwise_read_refusal
from fusec.analysis.index_types import index_type
from fusec.analysis.op_kinds import op_kind
from fusec.analysis.pointwise_registers import MATH_OPS, PARAM_REGISTERS
from fusec.analysis.strided_view import StridedView
from fusec.analysis.transposed_operands import staged_views, tile_axes
from fusec.analysis.view_operands import (
    CHAINED_VIEWS,
    INDEXED_READS,
    READ_IN_PLACE,
    computed_root,
    extra_reads,
    operand_view,
)
from fusec.codegen.computed_root import root_load
from fusec.codegen.indexed_read import Ints, read_element
from fusec.codegen.kernel_source import (
    KernelSource,
    broadcast_index,
    int_literal,
    kernel_header,
    launch_text,
)
from fusec.codegen.point_evaluator import PointEvaluator, body_params, load_expr, store_lines
from fusec.codegen.pointwise_index import ElementIndex
from fusec.codegen.pointwise_tile import passes_edge, read_directly, tile_type, tiled_lines
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
"""The flat schedule's own constants: it keeps per-element unravelling, so
the flat pointwise kernel's refit (`analysis/pointwise_registers.py`) does
not describe it; these are the values its fit below was made with."""
FLAT_COORD_REGISTERS = 1
"""Registers per iteration axis of the flat kernel's unravelled coordinates."""
TILE_BASE = 8
"""The tiled schedule: thread and block coordinates, the two shared offsets."""
TILE_ARRAY_REGISTERS_PER_ELEMENT = 1.0
"""Per array and element of a thread: the value in flight (the bases and
row offsets fold into the addresses)."""
TILE_EDGE_REGISTERS = 10
"""A tile that passes an axis' edge holds its clamped row coordinates, and a
libdevice sequence (erf, tanh, ...) its temporaries; ptxas overlaps the two
(either or both: 30-32 registers). Fitted to `ptxas -arch=sm_90 -v`
(2026-12-01) on 14 tiled kernels, 2-D to 4-D, one or two staged operands,
broadcasts, f32/f16/bf16, whole and partial tiles: 20-32 registers, every
estimate within 15%."""


def has_views(group: Operation) -> bool:
    """Whether pointwise `group` reads an operand through a transpose, slice,
    reshape, concat or gather (this module emits it)."""
    return any(isinstance(op, READ_IN_PLACE) for op in group.regions[0].block.ops)


@dataclass
class _Plan:
    """The group's body, iteration shape and tiling, decided before any text."""

    body: GroupBody
    shape: Shape
    tile: int
    threads: int
    unroll: int
    axes: tuple[int, int] | None  # (swapped axis A, innermost axis I) when tiled
    tiled: dict[tuple[SSAValue, StridedView], int] = field(
        default_factory=dict[tuple[SSAValue, StridedView], int])
    """Each staged operand (its root and composed view) by tile number."""

    @property
    def rows(self) -> int:
        """Threads along y: rows of the tile one pass covers."""
        return self.threads // self.tile


def _check(body: GroupBody, shape: Shape) -> None:
    for op in body.ops:
        if isinstance(op, (*CHAINED_VIEWS, *INDEXED_READS)):
            continue  # read in place: the refusals below say when it cannot be
        elif isinstance(op, nn.BatchNormOp) or not (
                isinstance(op, nn.ConstantOp) or op_kind(op) in POINT_KINDS):
            raise op_error(op, f"'{op.name}' cannot be generated in a pointwise group with "
                           "transposed operands")
    # the rule fusion legality applied when it formed the group
    reason = pointwise_read_refusal(body.ops, shape)
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
        for _, root, view in staged_views(body.ops, shape):
            if (root, view) not in plan.tiled:
                plan.tiled[(root, view)] = len(plan.tiled)
    return plan


def _view_load(body: GroupBody, op: Operation, coords: Sequence[str],
               lit: Callable[[int], str], name: str) -> tuple[list[str], str]:
    """The lines and the load of the element at `coords` of layout op `op`'s
    result, read from the group input at the root of its chain, or evaluated
    there when the group computes the root (only the coordinates the view
    varies in enter the index)."""
    found = operand_view(op, set(body.ops))
    if isinstance(found, str):
        raise op_error(op, f"cannot generate this pointwise group: {found}")
    root, view = found
    terms = [lit(view.offset)] if view.offset else []
    for c, n, stride in zip(coords[len(coords) - len(view.shape):], view.shape, view.strides,
                            strict=True):
        if n != 1 and stride != 0:  # only the dimensions the view varies in
            terms.append(c if stride == 1 else f"{c} * {lit(stride)}")
    return root_load(body, root, " + ".join(terms) or lit(0), name)


def _own_coords(shape: Sequence[int], coords: Sequence[str],
                lit: Callable[[int], str]) -> list[str]:
    """The iteration coordinates of a value of `shape` (right-aligned; 0
    along the dimensions it is broadcast in)."""
    own = list(coords[len(coords) - len(shape):])
    return [lit(0) if n == 1 else c for c, n in zip(own, shape, strict=True)]


def _element(plan: _Plan, coords: list[str], suffix: str, ints: Ints
             ) -> tuple[list[str], list[str], list[str]]:
    """Loads, arithmetic and stores of the element at `coords` (the flat
    schedule); `ints` types the view index's literals (as the
    coordinates are, so the index stays 32-bit)."""
    body, loads, lit = plan.body, [], ints.lit
    bound: dict[SSAValue, str] = {}
    pieces = concat_pieces(body.ops)  # evaluated under their concat's select, not here
    for k, op in enumerate(body.ops):
        if not isinstance(op, READ_IN_PLACE) or not read_directly(body, op) or op in pieces:
            continue
        name = f"tp{k}{suffix}"
        if isinstance(op, INDEXED_READS):
            lines, expr = read_element(body, op.results[0],
                                       _own_coords(tensor_shape(op.results[0]), coords, lit),
                                       ints, name)
            loads += [*lines, f"{name} = {expr}"]
        else:
            lines, expr = _view_load(body, op, coords, lit, name)
            loads += [*lines, f"{name} = {expr}"]
        bound[op.results[0]] = name
    inside = set(body.ops)
    for arg in body.args:
        if any(not isinstance(u.operation, READ_IN_PLACE) and not computed_root(
                u.operation, inside) and u.operation not in pieces for u in arg.uses):
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
    # Every index (into an input larger than the result too) must fit the type.
    itype = index_type(max([n, *(numel(tensor_shape(a)) for a in plan.body.args)]))
    tail = n % chunk != 0  # whole chunks: no clamp, no guard
    lines = [f"base = cuda.blockIdx.x * {int_literal(chunk)} + cuda.threadIdx.x"]
    parts = []
    for e in range(plan.unroll):
        at = ElementIndex(f"i{e}", plan.shape, itype, str(e))
        raw = f"base + {int_literal(e * plan.threads)}"
        if tail:
            lines += [f"i{e}_raw = {raw}", f"ok{e} = i{e}_raw < {int_literal(n)}",
                      f"i{e} = {itype}(min(i{e}_raw, {int_literal(n - 1)}))"]
        else:
            lines.append(f"i{e} = {itype}({raw})")
        coords = [at.run_coord(d, d) if size != 1 else at.lit(0)
                  for d, size in enumerate(plan.shape)]
        lines += at.coord_lines
        loads, arith, stores = _element(plan, coords, f"_{e}", Ints(itype))
        parts.append((loads, arith, [f"if ok{e}:", *(_INDENT + s for s in stores)]
                      if tail else stores))
    return lines + [line for k in range(3) for part in parts for line in part[k]]


def tile_shared_bytes(plan: _Plan) -> int:
    """Shared memory of the tiled kernel: one padded tile per tiled operand."""
    return sum(plan.tile * (plan.tile + 1) * numba_width(tile_type(key[0]))
               for key in plan.tiled)


def emit(group: GroupOp, kernel_name: str) -> KernelSource:
    """Generate the kernel of pointwise `group` (with transposed operands)
    under its `#fusion.pointwise` schedule."""
    schedule = group_schedule(group, PointwiseSchedule)
    plan = plan_group(group, schedule)
    looped: frozenset[str] = frozenset()
    if plan.axes is not None:
        body, grid, looped = tiled_lines(plan)
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
    return KernelSource(kernel_name, text + "\n", grid, block, body_params(plan.body),
                        # the tiles are static arrays (`shared_bytes_est` records their
                        # size): the launch asks for no dynamic shared memory on top
                        shared_bytes=0, notes=[f"pointwise, {per_thread}"],
                        grid_loops=looped)


def register_parts(group: GroupOp, schedule: PointwiseSchedule) -> list[tuple[str, float]]:
    """The register model's parts for this kernel: base, arrays in flight
    per element a thread handles (the tiled kernel: `tile * tile / block`
    rows), scalars, the flat kernel's coordinates, the tiled kernel's edge
    clamps or math temporaries."""
    plan = plan_group(group, schedule)
    tiled = plan.axes is not None
    per_thread = plan.tile // plan.rows if tiled else plan.unroll
    arrays = sum(1 for a in plan.body.args if numel(tensor_shape(a)) != 1) + len(
        plan.body.outputs) + extra_reads(plan.body.ops, plan.body.args)
    scalars = len(plan.body.args) - sum(1 for a in plan.body.args if numel(tensor_shape(a)) != 1)
    if not tiled:
        return [("base", TRANSPOSE_BASE),
                ("arrays in flight", TRANSPOSE_ARRAY_REGISTERS_PER_ELEMENT * per_thread * arrays),
                ("scalars", PARAM_REGISTERS * scalars),
                ("coordinates", FLAT_COORD_REGISTERS * len(plan.shape))]
    edge = passes_edge(plan) or any(isinstance(op, MATH_OPS) for op in plan.body.ops)
    return [("base", TILE_BASE),
            ("arrays in flight", TILE_ARRAY_REGISTERS_PER_ELEMENT * per_thread * arrays),
            ("scalars", PARAM_REGISTERS * scalars),
            ("edge clamps or math", TILE_EDGE_REGISTERS if edge else 0)]
