"""The plan of a pointwise group that reads operands through layout ops
(`has_views`): the group checked, its iteration shape, the tiling its
schedule asks for and each staged operand (`plan_group`), the tiles' shared
memory (`tile_shared_bytes`), the accesses each phase makes and whether a
tile passes an edge (`passes_edge`), and the register model's parts of its
kernel (`register_parts`). The kernel (`codegen/pointwise_transpose.py`,
`codegen/pointwise_tile.py`, whose docstrings tell it) is written from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.ir import BlockArgument, Operation, SSAValue

from fusec.analysis.diagnostics import op_error
from fusec.analysis.group_body import POINT_KINDS, GroupBody, compute_type, dtype_name
from fusec.analysis.group_memo import planned
from fusec.analysis.in_place_reads import pointwise_read_refusal
from fusec.analysis.op_kinds import op_kind
from fusec.analysis.pointwise_registers import MATH_OPS, PARAM_REGISTERS
from fusec.analysis.strided_view import StridedView
from fusec.analysis.targets import Target
from fusec.analysis.transposed_operands import Parts, staged_views, tile_axes, tile_iteration
from fusec.analysis.view_map import ViewMap, fine_access
from fusec.analysis.view_operands import (
    CHAINED_VIEWS,
    FOLDED_VIEWS,
    INDEXED_READS,
    READ_IN_PLACE,
    computed_root,
    extra_reads,
    operand_map,
    read_directly,
)
from fusec.dialects import nn
from fusec.dialects.element_types import numba_width, of_device_dtype
from fusec.dialects.fusion import GroupOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.schedule import PointwiseSchedule
from fusec.dialects.shapes import Shape, ShapeError, broadcast_shapes, fmt, numel
from fusec.scheduling import staged_gather
from fusec.scheduling.concat_rows import row_vector
from fusec.scheduling.concat_segments import segmented_concat
from fusec.scheduling.flat_vector import SCALAR_ACCESS, FlatVector, flat_vector
from fusec.scheduling.segment_vector import segment_vectors
from fusec.scheduling.staged_gather import StagedGather
from fusec.scheduling.tile_vector import SCALAR_TILE, TileVector, tile_vector

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
TILE_HALF_WORDS = 0.75
"""The same for a tile of halves moved in words on a wide side: two halves
per register in flight, widened one at a time (a 64x64 f16 or bf16
transposed add: ptxas 24 and 25, sm_90, 2026-12-06)."""
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
class TransposedPlan:
    """The group's body, iteration shape and tiling, decided before any text."""

    body: GroupBody
    shape: Shape
    tile: int
    threads: int
    unroll: int
    axes: tuple[int, int] | None  # (swapped axis A, innermost axis I) when tiled
    tiled: dict[tuple[SSAValue, StridedView | ViewMap], int] = field(
        default_factory=dict[tuple[SSAValue, StridedView | ViewMap], int])
    """Each staged operand (its root and composed view) by tile number."""
    parts: Parts | None = None
    """Tiled over an index map (`analysis/view_map.py`): the parts each
    dimension of `result_shape` splits into, and `shape` is all parts in
    order; every access is linear in them."""
    result_shape: Shape = ()
    vector: FlatVector = SCALAR_ACCESS
    """The flat schedule's elements per access and the arrays it moves wide
    (`scheduling/flat_vector.py`); one element per access when tiled."""
    concat: nn.ConcatOp | None = None
    """Untiled, the concat whose operands cut the grid into segments
    (`scheduling/concat_segments.py`), else None."""
    segment_vectors: tuple[FlatVector, ...] = ()
    """With `concat`, each segment's elements per access and the arrays it
    moves wide, by operand number (`scheduling/segment_vector.py`)."""
    concat_rows: bool = False
    """With `concat`: no segments; each access of the flat schedule (`vector`)
    is one whole row of the concat's result (`scheduling/concat_rows.py`)."""
    tile_vector: TileVector = SCALAR_TILE
    """Tiled, the elements per staging load and per store and the inputs
    loaded wide (`scheduling/tile_vector.py`)."""
    swapped_outer: int | None = None
    """Tiled, the merged axis group (of `side_groups`) the swapped side also
    spans (`swapped_side`), else None."""
    staged: StagedGather | None = None
    """Untiled, the gather whose table rows are staged in shared memory
    (`scheduling/staged_gather.py`), else None."""
    gather_parts: int = 0
    """With `staged`, the blocks that write each table row's outputs."""

    def access(self, view: StridedView | ViewMap) -> LinearAccess:
        """`view` (right-aligned, broadcast) as an access of the iteration."""
        if self.parts is None:
            assert isinstance(view, StridedView)
            return LinearAccess.of_view(view, self.shape)
        found = fine_access(view, self.result_shape, self.parts)
        assert found is not None  # `tile_iteration` checked every map
        return LinearAccess(*found)

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


def plan_group(group: GroupOp, schedule: PointwiseSchedule) -> TransposedPlan:
    """Check the group and decide the iteration shape and tiling."""
    body = GroupBody.of(group)
    try:
        shape = broadcast_shapes(*(tensor_shape(v) for v in body.outputs))
    except ShapeError as err:
        raise op_error(group, f"pointwise group results do not share one shape: {err}") from None
    _check(body, shape)
    tile, threads = schedule.int_field("tile"), schedule.int_field("block")
    if tile and schedule.int_field("gather_parts"):
        raise op_error(group, "schedule gather_parts applies to the flat schedule (tile = 0) only")
    axes = tile_axes(body.ops, shape) if tile and numel(shape) else None
    if tile and numel(shape) and axes is None:
        raise op_error(group, f"schedule tile = {tile}, but no transposed operand of "
                       f"{fmt(shape)} moves the innermost axis")
    if tile and (threads % tile or tile % (threads // tile or 1) or threads < tile):
        raise op_error(group, f"schedule block = {threads} does not split a {tile}x{tile} tile "
                       "into rows of whole warps")
    plan = TransposedPlan(body, shape, tile, threads, schedule.int_field("elements_per_thread"),
                          axes, result_shape=shape)
    found = tile_iteration(body.ops, shape) if axes is not None else None
    if found is not None and found[0] is not None:
        plan.parts = found[0]
        plan.shape = tuple(n for p in found[0] for n in p)
    if axes is not None:
        for _, root, view in staged_views(body.ops, shape):
            if (root, view) not in plan.tiled:
                plan.tiled[(root, view)] = len(plan.tiled)
        groups, a, i, j = side_groups(plan)
        staged = [(root, acc) for root, acc in tiled_accesses(plan).values()]
        results = [acc for _, _, acc in result_accesses(plan)]
        plan.swapped_outer = swapped_side(plan, groups, a, (i, j), results)
        plan.tile_vector = tile_vector(plan, groups, a, i, staged, results)
    elif parts := schedule.int_field("gather_parts"):
        plan.staged = staged_gather.find(body.ops, body.args, shape)
        if plan.staged is None:
            raise op_error(group, f"schedule gather_parts = {parts}, but the group has no "
                           "gather along the innermost axis of a table only it reads, "
                           "whose result is the group's shape")
        plan.gather_parts = parts
        plan.vector = flat_vector(plan)
        if plan.staged.per_row % plan.vector.lanes:
            plan.vector = SCALAR_ACCESS  # a row's accesses may not pass into the next row
    else:
        plan.vector = flat_vector(plan)
        plan.concat = segmented_concat(body, plan.shape)
        rows = row_vector(plan, plan.concat) if plan.concat is not None else None
        if rows is not None:
            plan.vector, plan.concat_rows = rows, True
        elif plan.concat is not None:
            plan.segment_vectors = segment_vectors(plan, plan.concat)
    return plan


def planned_group(group: GroupOp, schedule: PointwiseSchedule) -> TransposedPlan:
    """`plan_group` of `group` under `schedule`, once while both stay as they
    are: the pointwise kind's choice, the register model and the writer ask
    for the same tile (`group_memo`)."""
    return planned("transposed", group, lambda g: plan_group(g, schedule), extra=schedule)


# Numba element types a shared tile may hold; narrower integers widen to int32.
_TILE_TYPES = ("float32", "float64", "int32", "int64", "boolean")


@dataclass(frozen=True)
class LinearAccess:
    """Element `c` of the iteration space is element `offset + sum(c[d] *
    strides[d])` of the accessed buffer (stride 0: the access does not vary
    along `d`)."""

    offset: int
    strides: tuple[int, ...]

    @staticmethod
    def of_view(view: StridedView, iter_shape: Sequence[int]) -> LinearAccess:
        """A view right-aligned against `iter_shape` (broadcast where the
        view has size 1 or no dimension)."""
        lead = len(iter_shape) - len(view.shape)
        strides = [0] * lead + [s if n != 1 else 0 for n, s in zip(view.shape, view.strides,
                                                                   strict=True)]
        return LinearAccess(view.offset, tuple(strides))

    @staticmethod
    def of_shape(shape: Sequence[int], iter_shape: Sequence[int]) -> LinearAccess:
        """A contiguous buffer of `shape`, broadcast to `iter_shape`."""
        return LinearAccess.of_view(StridedView.contiguous(shape), iter_shape)

    def stride(self, group: Sequence[int]) -> int:
        """The stride along a group of merged axes (its innermost axis')."""
        return self.strides[group[-1]]


def axis_groups(iter_shape: Sequence[int],
                accesses: Sequence[LinearAccess]) -> list[tuple[int, ...]]:
    """Runs of iteration axes longer than 1 that every access steps across as
    across one axis: axis `d` joins the run before it when each access's
    stride there is `stride[d] * iter_shape[d]`. A merged coordinate times
    the stride of the run's innermost axis is then every access's index."""
    groups: list[tuple[int, ...]] = []
    for d, n in enumerate(iter_shape):
        if n == 1:
            continue
        if groups and all(a.strides[groups[-1][-1]] == a.strides[d] * n for a in accesses):
            groups[-1] = (*groups[-1], d)
        else:
            groups.append((d,))
    return groups


def tile_type(arg: BlockArgument) -> str:
    """The numba type `arg`'s shared tile holds (halves staged as float32,
    narrower integers as int32)."""
    ctype = compute_type(arg)
    return ctype if ctype in _TILE_TYPES else "int32"


def tile_shared_bytes(plan: TransposedPlan) -> int:
    """Shared memory of the kernel: one padded tile per tiled operand, or
    the staged table row (dynamic shared memory)."""
    if plan.staged is not None:
        return plan.staged.shared_bytes
    return sum(plan.tile * (plan.tile + 1) * numba_width(tile_type(key[0]))
               for key in plan.tiled)


def tiled_accesses(plan: TransposedPlan) -> dict[int, tuple[BlockArgument, LinearAccess]]:
    """Each staged operand's input and access, by tile number."""
    return {j: (root, plan.access(view))  # type: ignore[misc]
            for (root, view), j in plan.tiled.items()}


def direct_loads(plan: TransposedPlan) -> list[tuple[SSAValue, SSAValue | None, LinearAccess]]:
    """What the tiled kernel's compute phase loads from memory, in order:
    each value, the root it is read from (None: a group input read whole)
    and its access."""
    body, tiled = plan.body, plan.tiled
    loads: list[tuple[SSAValue, SSAValue | None, LinearAccess]] = []
    for op in body.ops:
        if not isinstance(op, FOLDED_VIEWS) or not read_directly(body, op):
            continue
        found = operand_map(op, set(body.ops))
        assert not isinstance(found, str)  # plan_group refused it otherwise
        if found in tiled:
            continue
        root, view = found
        loads.append((op.results[0], root, plan.access(view)))
    inside = set(body.ops)
    for arg in body.args:
        if any(not isinstance(u.operation, FOLDED_VIEWS) and not computed_root(
                u.operation, inside) for u in arg.uses):
            loads.append((arg, None, plan.access(StridedView.contiguous(tensor_shape(arg)))))
    return loads


def result_accesses(plan: TransposedPlan) -> list[tuple[int, SSAValue, LinearAccess]]:
    """Each result of the group, by number, and its access."""
    return [(k, v, plan.access(StridedView.contiguous(tensor_shape(v))))
            for k, v in enumerate(plan.body.outputs)]


def inner_side(plan: TransposedPlan, groups: Sequence[tuple[int, ...]], a: int,
               results: Sequence[LinearAccess]) -> int | None:
    """The group the tile's innermost side spans besides the innermost one
    (`groups[-1]`), or None. A store row of the tile covers the innermost
    group's extent at most: where that is shorter than the tile side (a
    permutation that makes a short axis innermost, `[..., 1425, 16]`), the
    side also spans the group outside it, so each row stores `tile`
    consecutive elements. Likewise where the innermost extent is no
    multiple of the tile side and spanning takes fewer tiles (dm18's
    `13 x 61` as one side of 793: 25 tiles at 99% use, not 2 per row at
    95%): the output's whole contiguous run is then one side, whose
    neighbouring tiles (and their shared sectors) are neighbouring blocks,
    not blocks a grid z-slice apart. That needs every result to step across
    the two groups as across one axis (the loads need not: they index each
    group apart) and the outer group not to hold the swapped axis."""
    j = len(groups) - 1
    ext_i = numel(tuple(plan.shape[d] for d in groups[j]))
    if j < 1 or j - 1 == a or not all(
            r.stride(groups[j]) and r.stride(groups[j - 1]) == ext_i * r.stride(groups[j])
            for r in results):
        return None
    tile, ext_o = plan.tile, numel(tuple(plan.shape[d] for d in groups[j - 1]))
    if ext_i < tile or -(-ext_i * ext_o // tile) < -(-ext_i // tile) * ext_o:
        return j - 1
    return None


def swapped_side(plan: TransposedPlan, groups: Sequence[tuple[int, ...]], a: int,
                 inner: tuple[int, int | None], results: Sequence[LinearAccess]) -> int | None:
    """The group the tile's swapped side spans besides the swapped one
    (`groups[a]`), or None. Where the swapped axis' extent is not a multiple
    of the tile side (37 of 32), its last tile is mostly idle (37 takes 2
    tiles at 58% use); spanning the group outside it too (dm36's `17 x 37`
    as one side of 629: 20 tiles at 98%) fills the tiles. Taken when that
    needs fewer tiles, the swapped extent is at least a tile side (a row of
    staging loads then meets at most one edge of the swapped axis: 2
    segments per warp), the outer group is neither of the innermost side's
    (`inner`) and every result varies along both groups (a thread's rows
    store distinct elements). The arrays that index the two groups apart
    split the side's coordinate in two (the staged operands once per
    thread); the results step across them as across one axis."""
    if a < 1 or a - 1 in inner or any(not r.stride(groups[a]) or not r.stride(groups[a - 1])
                                      for r in results):
        return None
    tile = plan.tile
    ext_a = numel(tuple(plan.shape[d] for d in groups[a]))
    ext_o = numel(tuple(plan.shape[d] for d in groups[a - 1]))
    if ext_a < tile or ext_a % tile == 0:
        return None
    spanned = -(-ext_a * ext_o // tile)
    # the spanned side's tiles are grid y, which no CUDA device takes past
    # `max_grid_yz`; the unspanned kernel puts the outer group on grid z,
    # whose launches loop over what the limit leaves
    if spanned > Target.max_grid_yz:
        return None
    return a - 1 if spanned < -(-ext_a // tile) * ext_o else None


def side_groups(plan: TransposedPlan) -> tuple[list[tuple[int, ...]], int, int, int | None]:
    """The merged axis groups of the tiled kernel, the group of the swapped
    axis, the innermost group and the group the innermost side also spans
    (`inner_side`)."""
    assert plan.axes is not None
    results = [acc for _, _, acc in result_accesses(plan)]
    accesses = [acc for _, acc in tiled_accesses(plan).values()] + [
        acc for _, _, acc in direct_loads(plan)] + results
    groups = axis_groups(plan.shape, accesses)
    a = next(k for k, g in enumerate(groups) if plan.axes[0] in g)
    i = next(k for k, g in enumerate(groups) if plan.axes[1] in g)
    return groups, a, i, inner_side(plan, groups, a, results)


def passes_edge(plan: TransposedPlan) -> bool:
    """Whether some tile passes the edge of a (merged) tile axis or side:
    the kernel then clamps coordinates and guards stores."""
    groups, a, i, j = side_groups(plan)
    ext_a = numel(tuple(plan.shape[d] for k in (plan.swapped_outer, a) if k is not None
                        for d in groups[k]))
    ext_i = numel(tuple(plan.shape[d] for k in (j, i) if k is not None for d in groups[k]))
    return ext_a % plan.tile != 0 or ext_i % plan.tile != 0


def access_lanes(plan: TransposedPlan) -> int:
    """Elements per access of the untiled kernel: the flat schedule's, or
    for concat segments the narrowest segment's (its loop sets the kernel's
    registers)."""
    if plan.concat is not None and not plan.concat_rows:
        return min((v.lanes for v in plan.segment_vectors), default=1)
    return plan.vector.lanes


def register_parts(group: GroupOp, schedule: PointwiseSchedule) -> list[tuple[str, float]]:
    """The register model's parts for this kernel: base, arrays in flight
    per element a thread handles (the tiled kernel: `tile * tile / block`
    rows), scalars, the flat kernel's coordinates, the tiled kernel's edge
    clamps or math temporaries."""
    plan = planned_group(group, schedule)
    tiled = plan.axes is not None
    # a wide access moves `lanes` elements on one index: the flat kernel's
    # addresses and loop state are per access, not per element
    per_thread = plan.tile // plan.rows if tiled else plan.unroll // access_lanes(plan)
    arrays = sum(1 for a in plan.body.args if numel(tensor_shape(a)) != 1) + len(
        plan.body.outputs) + extra_reads(plan.body.ops, plan.body.args)
    scalars = len(plan.body.args) - sum(1 for a in plan.body.args if numel(tensor_shape(a)) != 1)
    if not tiled:
        return [("base", TRANSPOSE_BASE),
                ("arrays in flight", TRANSPOSE_ARRAY_REGISTERS_PER_ELEMENT * per_thread * arrays),
                ("scalars", PARAM_REGISTERS * scalars),
                ("coordinates", FLAT_COORD_REGISTERS * len(plan.shape))]
    edge = passes_edge(plan) or any(isinstance(op, MATH_OPS) for op in plan.body.ops)
    halves = all(of_device_dtype(dtype_name(v)).width == 2
                 for v in (*plan.body.args, *plan.body.outputs))
    per_element = TILE_HALF_WORDS if plan.tile_vector.wide and halves \
        else TILE_ARRAY_REGISTERS_PER_ELEMENT
    return [("base", TILE_BASE),
            ("arrays in flight", per_element * per_thread * arrays),
            ("scalars", PARAM_REGISTERS * scalars),
            ("edge clamps or math", TILE_EDGE_REGISTERS if edge else 0)]
