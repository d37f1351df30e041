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
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from fusec.analysis.concat_operands import concat_pieces
from fusec.analysis.diagnostics import op_error
from fusec.analysis.group_body import GroupBody, dtype_name
from fusec.analysis.index_runs import index_runs, row_runs, run_coords
from fusec.analysis.index_types import index_type
from fusec.analysis.view_map import ViewMap
from fusec.analysis.view_operands import (
    INDEXED_READS,
    READ_IN_PLACE,
    computed_root,
    operand_map,
    read_directly,
)
from fusec.codegen.computed_root import Load, root_load
from fusec.codegen.gather_rows import staging_lines, table_load
from fusec.codegen.indexed_read import Ints, read_element, read_operand
from fusec.codegen.kernel_source import (
    KernelSource,
    broadcast_index,
    int_literal,
    kernel_header,
    launch_text,
)
from fusec.codegen.lane_loads import LaneLoads, wide_store_line
from fusec.codegen.point_evaluator import (
    PointEvaluator,
    body_params,
    hold_scalars,
    load_expr,
    store_lines,
)
from fusec.codegen.pointwise_index import ElementIndex, merged_coords
from fusec.codegen.pointwise_tile import tiled_lines
from fusec.codegen.wide_access import alignment_tests
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import fmt, numel
from fusec.scheduling.concat_segments import (
    Segment,
    outer_rows,
    rows_per_block,
    segments,
)
from fusec.scheduling.flat_vector import FlatVector, innermost_axis
from fusec.scheduling.transposed_plan import TransposedPlan

_INDENT = "    "

def _view_load(body: GroupBody, op: Operation, coords: Sequence[str], ints: Ints,
               name: str, load_at: Load = load_expr) -> tuple[list[str], str]:
    """The lines and the load of the element at `coords` of layout op `op`'s
    result, read from the group input at the root of its chain, or evaluated
    there when the group computes the root (only the coordinates the view
    varies in enter the index). An index map (`analysis/view_map.py`) reads
    at the coordinates of its parts, divided out of the dimensions'."""
    found = operand_map(op, set(body.ops))
    if isinstance(found, str):
        raise op_error(op, f"cannot generate this pointwise group: {found}")
    root, view = found
    lit = ints.lit
    own = coords[len(coords) - len(view.shape):]
    if isinstance(view, ViewMap):
        own = view.split(own, lambda c, k: ints.cast(f"{c} // {lit(k)}"),
                         lambda c, k: ints.cast(f"{c} % {lit(k)}"))
        view = view.fine
    terms = [lit(view.offset)] if view.offset else []
    for c, n, stride in zip(own, view.shape, view.strides, strict=True):
        if n != 1 and stride != 0:  # only the dimensions the view varies in
            terms.append(c if stride == 1 else f"{c} * {lit(stride)}")
    return root_load(body, root, " + ".join(terms) or lit(0), name, load_at)


def _own_coords(shape: Sequence[int], coords: Sequence[str],
                lit: Callable[[int], str]) -> list[str]:
    """The iteration coordinates of a value of `shape` (right-aligned; 0
    along the dimensions it is broadcast in)."""
    own = list(coords[len(coords) - len(shape):])
    return [lit(0) if n == 1 else c for c, n in zip(own, shape, strict=True)]


@dataclass(frozen=True)
class _Pinned:
    """Within a segment of the grid (`scheduling/concat_segments.py`): the
    concat whose operand `operand` holds every element, read at `coords`
    (the operand's own)."""

    concat: nn.ConcatOp
    operand: int
    coords: list[str]


def _element(plan: TransposedPlan, coords: list[str], suffix: str, ints: Ints,
             pinned: _Pinned | None = None) -> tuple[list[str], list[str], list[str]]:
    """Loads, arithmetic and stores of the element at `coords` (the flat
    schedule); `ints` types the view index's literals (as the
    coordinates are, so the index stays 32-bit)."""
    loads, arith, values = _element_values(plan, coords, suffix, ints, pinned)
    stores = [line for k, (v, val) in enumerate(zip(plan.body.outputs, values, strict=True))
              for line in store_lines(k, v, val, plan.shape, coords)]
    return loads, arith, stores


def _element_values(plan: TransposedPlan, coords: list[str], suffix: str, ints: Ints,
                    pinned: _Pinned | None = None, load_at: Load = load_expr
                    ) -> tuple[list[str], list[str], list[str]]:
    """`_element`'s loads and arithmetic, and the names of the results'
    values at `coords`; `load_at` writes the loads of group inputs at the
    iteration point (a vector access's lanes: `codegen/lane_loads.py`)."""
    body, loads, lit = plan.body, [], ints.lit
    bound: dict[SSAValue, str] = {}
    pieces = concat_pieces(body.ops)  # evaluated under their concat's select, not here
    for k, op in enumerate(body.ops):
        if not isinstance(op, READ_IN_PLACE) or not read_directly(body, op) or op in pieces:
            continue
        name = f"tp{k}{suffix}"
        if pinned is not None and op is pinned.concat:
            lines, expr = read_operand(body, pinned.concat, pinned.operand, pinned.coords,
                                       ints, name, load_at)
            loads += [*lines, f"{name} = {expr}"]
        elif isinstance(op, INDEXED_READS):
            staged = plan.staged if plan.staged and op is plan.staged.op else None
            lines, expr = read_element(body, op.results[0],
                                       _own_coords(tensor_shape(op.results[0]), coords, lit),
                                       ints, name,
                                       table_load(staged, load_at) if staged else load_at)
            loads += [*lines, f"{name} = {expr}"]
        else:
            lines, expr = _view_load(body, op, coords, ints, name, load_at)
            loads += [*lines, f"{name} = {expr}"]
        bound[op.results[0]] = name
    inside = set(body.ops)
    for arg in body.args:
        if arg in body.held:
            bound[arg] = body.held[arg]
        elif any(not isinstance(u.operation, READ_IN_PLACE) and not computed_root(
                u.operation, inside) and u.operation not in pieces for u in arg.uses):
            name = f"a{arg.index}{suffix}"
            index = broadcast_index(tensor_shape(arg), plan.shape, coords)
            loads.append(f"{name} = {load_at(body, arg, index)}")
            bound[arg] = name
    ev = PointEvaluator(body, plan.shape, coords, bound, suffix=suffix)
    values = [ev.value(v) for v in body.outputs]
    return loads, ev.take_lines(), values


def flat_lines(plan: TransposedPlan, block: str = "cuda.blockIdx.x") -> list[str]:
    """tile = 0: `unroll` elements per thread, `threads` apart, each at its
    unravelled coordinates; all loads, then the arithmetic, then the stores.
    `block` is this block's number among the kernel's blocks (another
    expression where the grid also runs other work: `codegen/split_launch.py`)."""
    n = numel(plan.shape)
    if n == 0:
        return ["pass"]
    if plan.vector.lanes > 1:
        return _vector_lines(plan, block)
    chunk = plan.threads * plan.unroll
    itype = flat_index_type(plan)
    tail = n % chunk != 0  # whole chunks: no clamp, no guard
    lines = [f"base = {block} * {int_literal(chunk)} + cuda.threadIdx.x"]
    parts = []
    runs = run_coords(plan.shape, index_runs(plan.body, plan.shape))
    for e in range(plan.unroll):
        at = ElementIndex(f"i{e}", plan.shape, itype, str(e))
        raw = f"base + {int_literal(e * plan.threads)}"
        lines += _indexed(f"i{e}", raw, itype, n - 1,
                          [f"i{e}_raw < {int_literal(n)}"] if tail else [], f"ok{e}")
        coords = merged_coords(at, runs)
        lines += at.coord_lines
        loads, arith, stores = _element(plan, coords, f"_{e}", Ints(itype))
        parts.append((loads, arith, _guarded(stores, f"ok{e}" if tail else None)))
    return lines + _in_order(parts)


Part = tuple[list[str], list[str], list[str]]
"""One element's (or access's) loads, arithmetic and stores."""


def _guarded(stores: list[str], ok: str | None) -> list[str]:
    """`stores`, under `if ok:` when the element may lie past the end."""
    return stores if ok is None else [f"if {ok}:", *(_INDENT + s for s in stores)]


def _in_order(parts: list[Part]) -> list[str]:
    """Every part's loads, then every part's arithmetic, then every part's
    stores: the loads of a thread's elements are all in flight at once."""
    return [line for k in range(3) for part in parts for line in part[k]]


def _indexed(name: str, raw: str, itype: str, last: int, guards: list[str],
             ok: str) -> list[str]:
    """`name = raw` in `itype`; with `guards` (a partial last chunk or span),
    `ok` holds them and `name` is clamped to a valid index (`last` at most)."""
    if not guards:
        return [f"{name} = {itype}({raw})"]
    return [f"{name}_raw = {raw}", f"{ok} = {' and '.join(guards)}",
            f"{name} = {itype}(min({name}_raw, {int_literal(last)}))"]


def _vector_lines(plan: TransposedPlan, block: str) -> list[str]:
    """The flat schedule with `lanes = plan.vector.lanes`
    (`scheduling/flat_vector.py`): `unroll / lanes` accesses per thread,
    `threads` accesses apart, each of `lanes` consecutive elements along the
    innermost axis. When every array the plan moves wide is aligned to its
    access, one word per array and access (`codegen/lane_loads.py`); else
    the same lanes, one element each."""
    return _aligned_or_not(plan.body, plan.vector, lambda wide: _lane_lines(plan, block, wide))


def _aligned_or_not(body: GroupBody, vec: FlatVector, lines: Callable[[bool], list[str]]
                    ) -> list[str]:
    """`lines(True)` (wide accesses) when every array `vec` moves wide is
    aligned to its access (always, within the runtime's alignment), else
    `lines(False)` (the same lanes, one element each)."""
    arrays = [(f"in{i}", dtype_name(body.args[i])) for i in sorted(vec.inputs)] + [
        (f"out{k}", dtype_name(body.outputs[k])) for k in sorted(vec.outputs)]
    tests = alignment_tests((a, vec.nbytes(d)) for a, d in arrays)
    if not tests:
        return lines(True)
    return [f"if {' and '.join(tests)}:", *(_INDENT + line for line in lines(True)),
            "else:", *(_INDENT + line for line in lines(False))]


def _lane_lines(plan: TransposedPlan, block: str, wide: bool) -> list[str]:
    """The accesses of `_vector_lines`, wide or one element per lane. The
    lanes step the innermost axis longer than 1, which `lanes` divides: lane
    0's coordinate is a multiple of it and no lane passes the row."""
    lanes, n = plan.vector.lanes, numel(plan.shape)
    words, per = n // lanes, plan.unroll // lanes
    itype = flat_index_type(plan)
    tail = words % (plan.threads * per) != 0
    lines = [f"base = {block} * {int_literal(plan.threads * per)} + cuda.threadIdx.x"]
    parts = []
    for a in range(per):
        raw = f"base + {int_literal(a * plan.threads)}"
        lines += _indexed(f"w{a}", raw, itype, words - 1,
                          [f"w{a}_raw < {int_literal(words)}"] if tail else [], f"ok{a}")
        more, part = _word_access(plan, wide, a, itype, f"ok{a}" if tail else None)
        lines += more
        parts.append(part)
    return lines + _in_order(parts)


def _word_access(plan: TransposedPlan, wide: bool, a: int, itype: str,
                 ok: str | None) -> tuple[list[str], Part]:
    """The index lines and the part of access `a` of `plan.vector.lanes`
    consecutive elements from word `w{a}` (lane 0 at element `w{a} * lanes`),
    its stores under `ok` when given."""
    vec, lanes = plan.vector, plan.vector.lanes
    axis = innermost_axis(plan.shape)
    at = ElementIndex(f"i{a}", plan.shape, itype, str(a))
    lines = [f"i{a} = {itype}(w{a} * {at.lit(lanes)})"]
    if plan.concat is not None and plan.concat_rows:
        # a whole row per access: lane 0 is at 0 along the axis (no run's)
        coords = merged_coords(at, run_coords(plan.shape, row_runs(plan.body, plan.concat)))
    else:
        coords = merged_coords(at, run_coords(plan.shape, index_runs(plan.body, plan.shape)))
    lines += at.coord_lines
    if plan.concat_rows:
        lane_points = _row_lanes(plan, coords, at)
        index, loads, arith, stores = _access(plan, vec, wide, f"_{a}", lane_points, itype)
        return lines + index, (loads, arith, _guarded(stores, ok))
    lane_points = []
    for j in range(lanes):
        at_lane = list(coords)
        more = []
        if j:
            assert axis is not None
            at_lane[axis] = f"l{a}_{j}"
            more.append(f"l{a}_{j} = {itype}({coords[axis]} + {at.lit(j)})")
        lane_points.append(_Lane(more, at_lane))
    index, loads, arith, stores = _access(plan, vec, wide, f"_{a}", lane_points, itype)
    return lines + index, (loads, arith, _guarded(stores, ok))


def _row_lanes(plan: TransposedPlan, coords: list[str], at: ElementIndex) -> list[_Lane]:
    """The lanes of one whole row of `plan.concat`'s result (`coords`, 0
    along the concat axis; `scheduling/concat_rows.py`): lane `j` at `j`
    along the axis, pinned to the operand holding it, read at its own
    coordinates (`j` less the operand's offset along the axis)."""
    concat = plan.concat
    assert concat is not None
    axis, points, offset = concat.axis, [], 0
    for k, v in enumerate(concat.inputs):
        for j in range(tensor_shape(v)[axis]):
            here, there = list(coords), list(coords)
            here[axis], there[axis] = at.lit(j), at.lit(offset + j)
            points.append(_Lane([], there, _Pinned(concat, k, here)))
        offset += tensor_shape(v)[axis]
    return points


def _staged_gather_lines(plan: TransposedPlan) -> list[str]:
    """The kernel of a gather staged by rows (`codegen/gather_rows.py`):
    block `(r, part)` stages table row `r`, then loops over its part of the
    row's outputs in words of `lanes` elements, `unroll / lanes` accesses
    per thread and round, `threads` apart (each access as the flat
    schedule's, the table read from `srow`)."""
    staged = plan.staged
    assert staged is not None
    lanes, threads = plan.vector.lanes, plan.threads
    per = max(1, plan.unroll // lanes)
    itype = flat_index_type(plan)
    row_words = staged.per_row // lanes
    part_words = -(-row_words // plan.gather_parts)
    rounds = -(-part_words // (threads * per))
    lit = int_literal
    head = [*staging_lines(plan.body, staged, threads, itype, "cuda.blockIdx.x"),
            f"first = {itype}(cuda.blockIdx.y) * {itype}({lit(part_words)})",
            f"end = min(first + {itype}({lit(part_words)}), {itype}({lit(row_words)}))",
            f"row_base = {itype}(cuda.blockIdx.x) * {itype}({lit(row_words)})"]

    def body(wide: bool) -> list[str]:
        lines = [f"base = first + {itype}(c) * {itype}({lit(threads * per)}) + "
                 f"{itype}(cuda.threadIdx.x)"]
        parts = []
        for a in range(per):
            lines += [f"w{a}_raw = base + {itype}({lit(a * threads)})",
                      f"ok{a} = w{a}_raw < end",
                      f"w{a} = row_base + min(w{a}_raw, end - {itype}(1))"]
            more, part = _word_access(plan, wide, a, itype, f"ok{a}")
            lines += more
            parts.append(part)
        return [f"for c in range({lit(rounds)}):",
                *(_INDENT + line for line in lines + _in_order(parts))]

    if lanes == 1:
        return head + body(False)
    return head + _aligned_or_not(plan.body, plan.vector, body)


@dataclass(frozen=True)
class _Lane:
    """Lane `j` of a vector access: the lines naming its coordinates, its
    coordinates in the iteration, and within a segment, the concat operand
    it reads (at the operand's coordinates)."""

    lines: list[str]
    coords: list[str]
    pinned: _Pinned | None = None


def _access(plan: TransposedPlan, vec: FlatVector, wide: bool, tag: str, lanes: Sequence[_Lane],
            itype: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """The index lines, loads, arithmetic and stores of one access of
    `vec.lanes` consecutive elements (`lanes`, lane 0 first), named by
    `tag`: each lane's code written as for one element, the arrays `vec`
    moves wide loaded and stored as one word when `wide`
    (`codegen/lane_loads.py`), else per lane."""
    hook = LaneLoads(vec.lanes, vec.inputs if wide else frozenset(), tag)
    index: list[str] = []
    loads: list[str] = []
    arith: list[str] = []
    values: list[list[str]] = []
    for j, lane in enumerate(lanes):
        index += lane.lines
        hook.start(j)
        lane_loads, lane_arith, lane_values = _element_values(
            plan, lane.coords, f"{tag}_{j}", Ints(itype), lane.pinned, load_at=hook.load)
        loads += hook.place_words(lane_loads) if j == 0 else lane_loads
        arith += lane_arith
        values.append(lane_values)
    stores: list[str] = []
    for k, v in enumerate(plan.body.outputs):
        lane_values = [values[j][k] for j in range(len(lanes))]
        if wide and k in vec.outputs:
            at = broadcast_index(tensor_shape(v), plan.shape, lanes[0].coords)
            stores.append(wide_store_line(k, v, at, lane_values))
            continue
        for j, lane in enumerate(lanes):
            stores += store_lines(k, v, lane_values[j], plan.shape, lane.coords)
    return index, loads, arith, stores


def flat_index_type(plan: TransposedPlan) -> str:
    """The index type of the flat schedule: every index (into an input larger
    than the result too) must fit it."""
    return index_type(max([numel(plan.shape), *(numel(tensor_shape(a))
                                                 for a in plan.body.args)]))


def _segment_lines(plan: TransposedPlan, concat: nn.ConcatOp, seg: Segment, itype: str,
                   span: Span) -> list[str]:
    """The flat schedule over `span.count` elements of operand `seg.operand`
    of `concat` from `span.first` (the block's part of the operand): each
    element at its coordinates in the operand, the concat's result at the
    same ones shifted by the operand's offset along the axis. Elements are
    numbered from `span.name_from`, so several operands' spans share a body.
    In accesses of consecutive elements where the plan says so
    (`scheduling/segment_vector.py`)."""
    vec = plan.segment_vectors[seg.operand]
    if vec.lanes > 1:
        return _aligned_or_not(plan.body, vec, lambda wide: _segment_lane_lines(
            plan, concat, seg, itype, span, wide))
    n, threads = numel(seg.shape), plan.threads
    unroll = -(-span.count // threads)
    lines = [f"base{seg.operand} = {span.first} + cuda.threadIdx.x"]
    parts = []
    runs = run_coords(seg.shape, index_runs(plan.body, seg.shape, (concat, seg.operand)))
    for e in range(unroll):
        x = span.name_from + e
        at = ElementIndex(f"i{x}", seg.shape, itype, str(x))
        raw = f"base{seg.operand} + {int_literal(e * threads)}"
        guards = [] if span.whole else [f"i{x}_raw < {int_literal(n)}"]
        if (e + 1) * threads > span.count:  # past the span for some threads
            guards.append(f"cuda.threadIdx.x < {int_literal(span.count - e * threads)}")
        lines += _indexed(f"i{x}", raw, itype, n - 1, guards, f"ok{x}")
        local = merged_coords(at, runs)
        lines += at.coord_lines
        shift, coords = _shifted(plan, concat, seg, local, x, at)
        lines += shift
        loads, arith, stores = _element(plan, coords, f"_{x}", Ints(itype),
                                        _Pinned(concat, seg.operand, local))
        parts.append((loads, arith, _guarded(stores, f"ok{x}" if guards else None)))
    return lines + _in_order(parts)


def _shifted(plan: TransposedPlan, concat: nn.ConcatOp, seg: Segment, local: list[str], x: int,
             at: ElementIndex) -> tuple[list[str], list[str]]:
    """The lines and the coordinates in the concat's result of element
    `x` at `local` in operand `seg.operand`: shifted by its offset along the
    axis."""
    axis, coords, lines = concat.axis, list(local), []
    if plan.shape[axis] != 1 and seg.offset:
        lines.append(f"o{x} = {at.itype}({local[axis]} + {at.lit(seg.offset)})")
        coords[axis] = f"o{x}"
    return lines, coords


def _segment_lane_lines(plan: TransposedPlan, concat: nn.ConcatOp, seg: Segment, itype: str,
                        span: Span, wide: bool) -> list[str]:
    """`_segment_lines` in accesses of `lanes` consecutive elements along
    the operand's innermost axis (which `lanes` divides, as it does the
    span and the shift along it: `scheduling/segment_vector.py`), wide or
    one element per lane; `threads` accesses apart."""
    vec, threads = plan.segment_vectors[seg.operand], plan.threads
    lanes = vec.lanes
    words, count = numel(seg.shape) // lanes, span.count // lanes
    axis = innermost_axis(seg.shape)
    assert axis is not None and span.count % lanes == 0
    lines = [f"base{seg.operand} = {span.block} * {int_literal(count)} + cuda.threadIdx.x"]
    parts = []
    runs = run_coords(seg.shape, index_runs(plan.body, seg.shape, (concat, seg.operand)))
    for e in range(-(-count // threads)):
        x = span.name_from + e
        at = ElementIndex(f"i{x}", seg.shape, itype, str(x))
        raw = f"base{seg.operand} + {int_literal(e * threads)}"
        guards = [] if span.whole else [f"w{x}_raw < {int_literal(words)}"]
        if (e + 1) * threads > count:  # past the span for some threads
            guards.append(f"cuda.threadIdx.x < {int_literal(count - e * threads)}")
        lines += _indexed(f"w{x}", raw, itype, words - 1, guards, f"ok{x}")
        lines.append(f"i{x} = {itype}(w{x} * {at.lit(lanes)})")
        local = merged_coords(at, runs)
        lines += at.coord_lines
        shift, coords = _shifted(plan, concat, seg, local, x, at)
        lines += shift
        points = [_Lane([], coords, _Pinned(concat, seg.operand, local))]
        for j in range(1, lanes):
            here, there = list(local), list(coords)
            here[axis] = f"l{x}_{j}"
            more = [f"l{x}_{j} = {itype}({local[axis]} + {at.lit(j)})"]
            if coords[axis] == local[axis]:
                there[axis] = here[axis]
            else:  # the shift is along the lanes' axis
                there[axis] = f"o{x}_{j}"
                more.append(f"o{x}_{j} = {itype}({coords[axis]} + {at.lit(j)})")
            points.append(_Lane(more, there, _Pinned(concat, seg.operand, here)))
        index, loads, arith, stores = _access(plan, vec, wide, f"_{x}", points, itype)
        lines += index
        parts.append((loads, arith, _guarded(stores, f"ok{x}" if guards else None)))
    return lines + _in_order(parts)


@dataclass(frozen=True)
class Span:
    """A block's part of one operand: `count` elements from flat index
    `block * count` (`block` an expression: the block's number among those
    of the operand); `whole` when every block's part lies inside the operand
    (no bound test); element names numbered from `name_from`."""

    block: str
    count: int
    whole: bool
    name_from: int = 0

    @property
    def first(self) -> str:
        """The flat index of the span's first element."""
        return f"{self.block} * {int_literal(self.count)}"


def _segment_note(plan: TransposedPlan, seg: Segment) -> str:
    """What the comment heading a segment adds about its accesses."""
    lanes = plan.segment_vectors[seg.operand].lanes
    return f", {lanes} consecutive elements per access" if lanes > 1 else ""


def _segmented_lines(plan: TransposedPlan, concat: nn.ConcatOp) -> tuple[list[str], int]:
    """The kernel body over `concat`'s operands (`scheduling/concat_segments.py`):
    blocks of whole output rows visiting every operand in turn when a row is
    narrower than a block's chunk, else one segment of blocks per operand;
    and the blocks of the grid."""
    chunk = plan.threads * plan.unroll
    segs = segments(concat, chunk)
    itype = flat_index_type(plan)
    rows = rows_per_block(concat, chunk)
    if rows is not None:  # every operand's part of the block's rows, in turn
        lines: list[str] = []
        named = 0
        for seg in segs:
            width = rows * numel(seg.shape[concat.axis:])
            span = Span("cuda.blockIdx.x", width, numel(seg.shape) % width == 0, named)
            named += -(-width // plan.threads)
            lines += [f"# operand {seg.operand}: {fmt(seg.shape)} at offset {seg.offset} "
                      f"along axis {concat.axis}{_segment_note(plan, seg)}",
                      *_segment_lines(plan, concat, seg, itype, span)]
        return lines, -(-outer_rows(concat) // rows)
    lines = []
    for k, seg in enumerate(segs):
        end = seg.first_block + seg.blocks
        head = ("else:" if k == len(segs) - 1 else
                f"{'if' if k == 0 else 'elif'} cuda.blockIdx.x < {int_literal(end)}:")
        block = "cuda.blockIdx.x" if not seg.first_block else (
            f"(cuda.blockIdx.x - {int_literal(seg.first_block)})")
        span = Span(block, chunk, numel(seg.shape) % chunk == 0)
        lines += [f"{head}  # operand {seg.operand}: {fmt(seg.shape)} at offset "
                  f"{seg.offset} along axis {concat.axis}{_segment_note(plan, seg)}",
                  *(_INDENT + line for line in _segment_lines(plan, concat, seg, itype, span))]
    return lines, segs[-1].first_block + segs[-1].blocks


def _row_elements(concat: nn.ConcatOp, rows: int, plan: TransposedPlan) -> int:
    """A thread's elements over all operands in the row layout (whole
    accesses where an operand moves several elements per access)."""
    total = 0
    for k, v in enumerate(concat.inputs):
        if numel(tensor_shape(v)):
            lanes = plan.segment_vectors[k].lanes
            total += lanes * -(-rows * numel(tensor_shape(v)[concat.axis:]) // (
                lanes * plan.threads))
    return total


def _segment_widths(plan: TransposedPlan) -> str:
    """The launch note on the segments that move several elements per access."""
    wide = [f"{v.lanes} for operand {k}" for k, v in enumerate(plan.segment_vectors)
            if v.lanes > 1]
    return f"; accesses of consecutive elements: {', '.join(wide)}" if wide else ""


def emit(group: GroupOp, plan: TransposedPlan, kernel_name: str) -> KernelSource:
    """Generate the kernel of pointwise `group` (with transposed operands)
    as its plan says."""
    looped: frozenset[str] = frozenset()
    held = hold_scalars(plan.body, plan.body.args)  # before any line reads them
    if plan.axes is not None:
        body, grid, looped = tiled_lines(plan)
        block = (plan.tile, plan.rows, 1)
        per_thread = (f"{plan.tile}x{plan.tile} output tile per block, transposed operands "
                      f"staged in shared memory, {plan.tile // plan.rows} elements per thread")
        if plan.tile_vector.wide:  # `scheduling/tile_vector.py`
            per_thread += (f"; staging loads of {plan.tile_vector.load} consecutive elements, "
                           f"stores of {plan.tile_vector.store} (aligned arrays)")
    elif (staged := plan.staged) is not None:
        body = _staged_gather_lines(plan)
        grid, block = (staged.rows, plan.gather_parts, 1), (plan.threads, 1, 1)
        lanes = plan.vector.lanes
        per_thread = (f"one table row of {staged.row} elements staged in shared memory per "
                      f"block, its {staged.per_row} gathered outputs split over "
                      f"{plan.gather_parts} block(s), "
                      + (f"in accesses of {lanes} consecutive ones" if lanes > 1 else
                         "one element per access") + f", {plan.threads} apart")
    elif (concat := plan.concat) is not None and plan.concat_rows:
        body = flat_lines(plan)
        grid = (max(1, -(-numel(plan.shape) // (plan.threads * plan.unroll))), 1, 1)
        block = (plan.threads, 1, 1)
        per_thread = (f"{plan.unroll // plan.vector.lanes} rows of the concat along axis "
                      f"{concat.axis} per thread, {plan.threads} apart, each row's "
                      f"{plan.vector.lanes} elements stored as one word")
    elif concat is not None:
        body, blocks = _segmented_lines(plan, concat)
        grid, block = (blocks, 1, 1), (plan.threads, 1, 1)
        rows = rows_per_block(concat, plan.threads * plan.unroll)
        per_thread = (f"{plan.unroll} elements per thread, {plan.threads} apart, one "
                      f"segment of blocks per operand of the concat along axis {concat.axis}"
                      if rows is None else
                      f"{rows} rows of the concat along axis {concat.axis} per block, each "
                      f"operand's part of them in turn, {_row_elements(concat, rows, plan)} "
                      f"elements per thread, {plan.threads} apart") + _segment_widths(plan)
    else:
        body = flat_lines(plan)
        grid = (max(1, -(-numel(plan.shape) // (plan.threads * plan.unroll))), 1, 1)
        block = (plan.threads, 1, 1)
        per_thread = (f"{plan.unroll} elements per thread, {plan.threads} apart, transposed "
                      "operands read at strided indices")
        if plan.vector.lanes > 1:
            per_thread = (f"{plan.unroll} elements per thread in accesses of "
                          f"{plan.vector.lanes} consecutive ones, {plan.threads} accesses apart, "
                          "transposed operands read at strided indices")
    notes = [f"iteration shape {fmt(plan.shape)}"]
    header = kernel_header(group, plan.body.ops, launch_text(grid, block, per_thread), notes)
    text = "\n".join([*header, "@cuda.jit", f"def {kernel_name}({plan.body.signature()}):",
                      *(_INDENT + line for line in [*held, *body])])
    return KernelSource(kernel_name, text + "\n", grid, block, body_params(plan.body),
                        # the tiles are static arrays (`shared_bytes_est` records their
                        # size): the launch asks for no dynamic shared memory on top; a
                        # staged row is the dynamic array
                        shared_bytes=plan.staged.shared_bytes if plan.staged else 0,
                        notes=[f"pointwise, {per_thread}"], grid_loops=looped)


