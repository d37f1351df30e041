"""The tiled schedule of pointwise groups with transposed operands
(`#fusion.pointwise<..., tile = T>`, `codegen/pointwise_transpose.py`):
its index arithmetic, written to cost next to nothing per element.

Every access the kernel makes (a tiled operand, a broadcast or strided
input, a result) is linear in the iteration coordinates: element `c` is at
`offset + sum(c[d] * strides[d])` (`LinearAccess`,
`scheduling/transposed_plan.py`). So:

- Neighbouring iteration axes merge when every access steps across them as
  across one axis (`axis_groups`): NCHW -> NHWC of `[32, 64, 56, 56]` tiles
  `H*W = 3136` rows (no partial tile) by `C = 64`, not `W = 56` by `C`.
- An innermost side shorter than the tile (the output's innermost axis
  16 long), or no multiple of it where that takes fewer tiles (dm18's
  `13 x 61`), spans the output axis outside it too (`inner_side`,
  `scheduling/transposed_plan.py`): its coordinate splits into the two
  axes' (`ci_h`, `ci_l`) once per thread for the compute phase and once
  per row for the staged loads, so each row of stores is a tile side of
  consecutive outputs.
- A swapped side whose extent is no multiple of the tile (37) spans the
  output axis outside it too where that fills the tiles (`swapped_side`,
  dm36's `17 x 37` as 629: 20 tiles, not 2 per row at 58% use): the staged
  loads split its coordinate (`la_h`, `la_l`) once per thread, and the
  compute phase each row's for the arrays that index the two axes apart
  (the results step across them as one: a base and literal steps).
- Each thread computes one base index per access, in uint32 while every
  index fits (`pointwise_index.index_type`; unsigned: no wrap-around test,
  no floor fix-ups), once per block; element `r` of a thread is the base
  plus the literal `r * rows * stride`. The base is widened to uint64 once,
  so that literal folds into the load's immediate offset (a uint32 sum
  would have to be zero-extended per element).
- The shared tile is one flat `T * (T + 1)` array indexed by two per-thread
  offsets (`ty * (T + 1) + tx` to stage, `tx * (T + 1) + ty` to read) plus
  literals: the pad keeps both phases free of bank conflicts, and no
  per-element 2-D index (a 64-bit multiply) remains.
- Tails: where a tile passes the edge of an axis, its coordinate is
  clamped for loads and the stores are guarded; where tiles divide the
  axis, neither is written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.ir import BlockArgument, SSAValue

from fusec.analysis.group_body import dtype_name
from fusec.analysis.index_types import index_type
from fusec.analysis.view_operands import FOLDED_VIEWS, operand_map, read_directly
from fusec.codegen.computed_root import root_load
from fusec.codegen.kernel_source import int_literal
from fusec.codegen.lane_loads import LaneLoads, wide_store_line
from fusec.codegen.launch_grid import block_index_lines
from fusec.codegen.point_evaluator import PointEvaluator, load_expr, store_expr
from fusec.codegen.wide_access import alignment_tests
from fusec.dialects.element_types import of_device_dtype
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import numel
from fusec.scheduling.transposed_plan import (
    LinearAccess,
    TransposedPlan,
    direct_loads,
    result_accesses,
    side_groups,
    tile_type,
    tiled_accesses,
)

_INDENT = "    "

@dataclass
class _Reads:
    """What the compute phase loads directly, and the results it stores."""

    loads: list[tuple[SSAValue, LinearAccess, Callable[[str, str], tuple[list[str], str]]]]
    stores: list[tuple[int, SSAValue, LinearAccess]]


def _reads(plan: TransposedPlan) -> _Reads:
    """The plan's direct loads (each with the text that reads it) and stores."""
    body = plan.body
    loads: list[tuple[SSAValue, LinearAccess, Callable[[str, str], tuple[list[str], str]]]] = [
        (value, acc, (lambda i, n, r=root: root_load(body, r, i, n)) if root is not None
         else (lambda i, n, a=value: ([], load_expr(body, a, i))))
        for value, root, acc in direct_loads(plan)]
    return _Reads(loads, result_accesses(plan))


@dataclass
class _Tiling:
    """The merged axes and the names the kernel text uses."""

    plan: TransposedPlan
    groups: list[tuple[int, ...]]
    a: int  # the group holding the tile's swapped axis
    i: int  # the group holding the innermost axis
    j: int | None  # the group the innermost side also spans (`inner_side`)
    k: int | None  # the group the swapped side also spans (`swapped_side`)
    itype: str

    @property
    def ext_a(self) -> int:
        """The swapped side's extent (both its groups where it spans two)."""
        return self.ext(self.a) * (1 if self.k is None else self.ext(self.k))

    @property
    def ext_i(self) -> int:
        """The innermost side's extent (both its groups where it spans two)."""
        return self.ext_lo * (1 if self.j is None else self.ext(self.j))

    @property
    def ext_lo(self) -> int:
        return self.ext(self.i)

    def ext(self, g: int) -> int:
        return numel(tuple(self.plan.shape[d] for d in self.groups[g]))

    @property
    def batch(self) -> list[int]:
        return [g for g in range(len(self.groups))
                if g not in (self.a, self.i, self.j, self.k)]

    def split(self, coord: str) -> list[str]:
        """A coordinate along the innermost side split into its two groups'
        (`{coord}_h`, `{coord}_l`); nothing where the side is one group."""
        return [] if self.j is None else self._halves(coord, self.ext_lo)

    def split_a(self, coord: str) -> list[str]:
        """`split` along the swapped side."""
        return [] if self.k is None else self._halves(coord, self.ext(self.a))

    def _halves(self, coord: str, lo: int) -> list[str]:
        return [f"{coord}_h = {coord} // {self.lit(lo)}", f"{coord}_l = {coord} % {self.lit(lo)}"]

    def apart(self, acc: LinearAccess) -> bool:
        """Whether `acc` indexes the swapped side's two groups apart (the
        results and the arrays of their layout step across them as across
        one axis: the side's coordinate times one stride)."""
        sa = acc.stride(self.groups[self.a])
        return self.k is not None and acc.stride(self.groups[self.k]) != self.ext(self.a) * sa

    def swapped_terms(self, acc: LinearAccess, coord: str) -> list[tuple[str, int]]:
        """`acc`'s terms along the swapped side at `coord` (split by
        `split_a` where `apart`)."""
        if not self.apart(acc):
            return [(coord, acc.stride(self.groups[self.a]))]
        return [(f"{coord}_h", acc.stride(self.groups[self.k])),
                (f"{coord}_l", acc.stride(self.groups[self.a]))]

    def varies_a(self, acc: LinearAccess) -> bool:
        """Whether `acc` varies along the swapped side."""
        return any(s for _, s in self.swapped_terms(acc, ""))

    def inner_terms(self, acc: LinearAccess, coord: str) -> list[tuple[str, int]]:
        """`acc`'s terms along the innermost side at `coord` (split by `split`)."""
        if self.j is None:
            return [(coord, acc.stride(self.groups[self.i]))]
        return [(f"{coord}_h", acc.stride(self.groups[self.j])),
                (f"{coord}_l", acc.stride(self.groups[self.i]))]

    def lit(self, value: int) -> str:
        return f"{self.itype}({int_literal(value)})"

    def sum(self, terms: Sequence[tuple[str, int]], offset: int = 0) -> str:
        """`offset + c * stride + ...` in the index type (stride-0 terms left out)."""
        parts = [self.lit(offset)] if offset else []
        parts += [c if s == 1 else f"{c} * {self.lit(s)}" for c, s in terms if s]
        return " + ".join(parts) or self.lit(0)


def _tiling(plan: TransposedPlan) -> _Tiling:
    groups, a, i, j = side_groups(plan)
    # Raw (unclamped) indices run up to a tile past an edge: keep 2x headroom.
    largest = max([numel(plan.shape), *(numel(tensor_shape(a)) for a in plan.body.args)])
    return _Tiling(plan, groups, a, i, j, plan.swapped_outer, index_type(2 * largest))


def _u64(tl: _Tiling, expr: str) -> str:
    return expr if tl.itype == "uint64" else f"uint64({expr})"


def _plus(base: str, offset: int) -> str:
    """`base` (a uint64 name) plus a literal offset."""
    return f"{base} + uint64({int_literal(offset)})" if offset else base


def _offset(tl: _Tiling, coord: str, step: int) -> str:
    """`coord` (a name of the index type) plus a literal step."""
    return f"{coord} + {tl.lit(step)}" if step else coord


def _batch_lines(tl: _Tiling, accesses: dict[str, LinearAccess]) -> list[str]:
    """The block's batch coordinates (unravelled from `bz` once) and each
    access's batch part `bb_<name>`."""
    lines = [f"m0 = {tl.itype}(by) * {tl.lit(tl.plan.tile)}"]
    rest = f"{tl.itype}(bz)"
    names: dict[int, str] = {}
    batch = tl.batch
    for n, g in enumerate(reversed(batch)):
        size = numel(tuple(tl.plan.shape[d] for d in tl.groups[g]))
        names[g] = f"b{g}"
        if n == len(batch) - 1:
            lines.append(f"b{g} = {rest}")
        else:
            lines += [f"b{g} = {rest} % {tl.lit(size)}", f"br{g} = {rest} // {tl.lit(size)}"]
            rest = f"br{g}"
    for name, acc in accesses.items():
        terms = [(names[g], acc.stride(tl.groups[g])) for g in batch]
        lines.append(f"bb_{name} = {tl.sum(terms, acc.offset)}")
    return lines


@dataclass(frozen=True)
class _Side:
    """How the threads of a phase cover the tile: `lanes` consecutive
    elements per access, a tile row `cols` threads wide, `rows` rows per
    pass; the thread's column and row (`tx`, `ty` for one element per
    access) and the shared offset of its first element."""

    lanes: int
    cols: int
    rows: int
    col: str
    row: str
    shared: str

    @property
    def passes(self) -> int:
        return self.cols * self.lanes // self.rows

    def lines(self, tl: _Tiling, pitch: int, along_rows: bool) -> list[str]:
        """The thread's column, row and shared offset (nothing for one lane:
        the kernel's head names them). `along_rows`: the tile row holds the
        thread's lanes (staging), else its column does (the compute phase)."""
        if self.lanes == 1:
            return []
        col = f"{self.col} * {tl.lit(self.lanes)}"
        offset = (f"{self.row} * {tl.lit(pitch)} + {col}" if along_rows else
                  f"{self.col} * {tl.lit(self.lanes * pitch)} + {self.row}")
        return [f"{self.col} = tt % {tl.lit(self.cols)}",
                f"{self.row} = tt // {tl.lit(self.cols)}",
                f"{self.shared} = {_u64(tl, offset)}"]

    def first(self, tl: _Tiling) -> str:
        """The thread's first coordinate along its lanes' side, within the tile."""
        return self.col if self.lanes == 1 else f"{self.col} * {tl.lit(self.lanes)}"


def _side(plan: TransposedPlan, lanes: int, load: bool) -> _Side:
    if lanes == 1:
        return _Side(1, plan.tile, plan.rows, "tx", "ty", "wr" if load else "rd")
    cols = plan.tile // lanes
    names = ("lq", "lr", "wrv") if load else ("sq", "sr", "rdv")
    return _Side(lanes, cols, plan.threads // cols, *names)


def _lane(index: str, lane: int) -> str:
    """`index` (a uint64 expression) plus `lane`."""
    return _plus(index, lane) if lane else index


def _load_phase(tl: _Tiling, tiled: dict[int, tuple[BlockArgument, LinearAccess]],
                lanes: int = 1, wide: frozenset[int] = frozenset()) -> list[str]:
    """Each staged operand's tile, `threadIdx.x` walking the swapped axis
    (the operand's contiguous one): rows `r * rows` apart; `lanes`
    consecutive elements per access, the inputs in `wide` loaded as one
    word (`codegen/lane_loads.py`)."""
    plan, gi = tl.plan, tl.groups[tl.i]
    side = _side(plan, lanes, load=True)
    rows, passes, pitch = side.rows, side.passes, plan.tile + 1
    first = f"m0 + {side.first(tl)}"
    la = first if tl.ext_a % plan.tile == 0 else f"min({first}, {tl.lit(tl.ext_a - lanes)})"
    # split once per thread where some staged operand indexes the side's groups apart
    split = tl.split_a("la") if any(tl.apart(acc) for _, acc in tiled.values()) else []
    lines = [*side.lines(tl, pitch, along_rows=True), f"la = {la}", *split,
             f"li = n0 + {side.row}"]
    loads: list[str] = []
    writes: list[str] = []
    # A side of two groups splits each row's coordinate (no literal step).
    per_row = tl.ext_i % plan.tile != 0 or tl.j is not None
    if tl.ext_i % plan.tile != 0:
        lines += [f"li_{r} = min({_offset(tl, 'li', r * rows)}, {tl.lit(tl.ext_i - 1)})"
                  for r in range(passes)]
    elif per_row:
        lines += [f"li_{r} = {_offset(tl, 'li', r * rows)}" for r in range(passes)]
    if tl.j is not None:
        lines += [line for r in range(passes) for line in tl.split(f"li_{r}")]
    for j, (arg, acc) in tiled.items():
        si, la_terms = acc.stride(gi), tl.swapped_terms(acc, "la")
        if not per_row:
            lines.append(f"s{j} = {_u64(tl, tl.sum([(f'bb_t{j}', 1), *la_terms, ('li', si)]))}")
        for r in range(passes):
            if per_row:
                terms = [(f"bb_t{j}", 1), *la_terms, *tl.inner_terms(acc, f"li_{r}")]
                index = _u64(tl, tl.sum(terms))
            else:
                index = _plus(f"s{j}", r * rows * si)
            if lanes == 1:
                more, expr = root_load(plan.body, arg, index, f"x{j}_{r}")
                loads += [*more, f"x{j}_{r} = {expr}"]
                writes.append(f"tile{j}[{_plus('wr', r * rows * pitch)}] = x{j}_{r}")
                continue
            hook = LaneLoads(lanes, wide, f"_{j}_{r}")
            for k in range(lanes):
                hook.start(k)
                name = f"x{j}_{r}_{k}"
                more, expr = root_load(plan.body, arg, _lane(index, k), name, hook.load)
                lane_lines = [*more, f"{name} = {expr}"]
                loads += hook.place_words(lane_lines) if k == 0 else lane_lines
                writes.append(f"tile{j}[{_plus(side.shared, r * rows * pitch + k)}] = {name}")
    return [*lines, *loads, *writes, "cuda.syncthreads()"]


def _compute_phase(tl: _Tiling, reads: _Reads, lanes: int = 1) -> list[str]:
    """Outputs with `threadIdx.x` walking the innermost axis: all loads,
    then the arithmetic, then the (guarded where tiles pass an edge) stores;
    `lanes` consecutive outputs per store."""
    plan = tl.plan
    side = _side(plan, lanes, load=False)
    rows, passes = side.rows, side.passes
    tail_i = tl.ext_i % plan.tile != 0
    ci = f"min(ci_raw, {tl.lit(tl.ext_i - lanes)})" if tail_i else "ci_raw"
    lines = [*side.lines(tl, plan.tile + 1, along_rows=False),
             f"ci_raw = n0 + {side.first(tl)}", f"ci = {ci}", *tl.split("ci"),
             f"ca = m0 + {side.row}"]
    # A side of two groups that an access indexes apart splits each row's
    # coordinate for it (no literal step).
    split = any(tl.apart(acc) for _, acc, _ in reads.loads) or any(
        tl.apart(acc) for _, _, acc in reads.stores)
    if tl.ext_a % plan.tile != 0:
        lines += [f"ca_{r} = min({_offset(tl, 'ca', r * rows)}, {tl.lit(tl.ext_a - 1)})"
                  for r in range(passes)]
    elif split:
        lines += [f"ca_{r} = {_offset(tl, 'ca', r * rows)}" for r in range(passes)]
    if split:
        lines += [line for r in range(passes) for line in tl.split_a(f"ca_{r}")]
    for k, (_, acc, _load) in enumerate(reads.loads):
        if not _row_indexed(tl, acc):
            terms = [(f"bb_l{k}", 1), *tl.swapped_terms(acc, "ca"), *tl.inner_terms(acc, "ci")]
            lines.append(f"l{k} = {_u64(tl, tl.sum(terms))}")
    for k, _, acc in reads.stores:
        if not tl.apart(acc):  # else each row's index (`_row`)
            terms = [(f"bb_o{k}", 1), *tl.swapped_terms(acc, "ca"), *tl.inner_terms(acc, "ci")]
            lines.append(f"o{k} = {_u64(tl, tl.sum(terms))}")
    parts = [_row(tl, reads, r, side) for r in range(passes)]
    return lines + [line for k in range(3) for part in parts for line in part[k]]


def _row_indexed(tl: _Tiling, acc: LinearAccess) -> bool:
    """Whether the compute phase indexes `acc` in each row from the row's
    own (clamped or split) swapped coordinate `ca_<r>`, not the thread's
    first plus a literal step: it varies along the swapped side, and a tile
    passes the side's edge or it indexes the side's two groups apart."""
    return tl.varies_a(acc) and (tl.ext_a % tl.plan.tile != 0 or tl.apart(acc))


def _row(tl: _Tiling, reads: _Reads, r: int, side: _Side
         ) -> tuple[list[str], list[str], list[str]]:
    """Loads, arithmetic and stores of a thread's elements in row `r`
    (`side.lanes` consecutive ones along the innermost side)."""
    plan, ga, gi = tl.plan, tl.groups[tl.a], tl.groups[tl.i]
    step = r * side.rows
    tail_a, tail_i = tl.ext_a % plan.tile != 0, tl.ext_i % plan.tile != 0
    inside = set(plan.body.ops)
    staged: dict[SSAValue, int] = {}
    for op in plan.body.ops:
        if isinstance(op, FOLDED_VIEWS) and read_directly(plan.body, op):
            key = operand_map(op, inside)
            if not isinstance(key, str) and key in plan.tiled:
                staged[op.results[0]] = plan.tiled[key]
    loads: list[str] = []
    arith: list[str] = []
    values: list[list[str]] = []
    for lane in range(side.lanes):
        tag = f"_{r}" if side.lanes == 1 else f"_{r}_{lane}"
        at = step + lane * (plan.tile + 1)
        bound = {v: f"tile{j}[{_plus(side.shared, at)}]" for v, j in staged.items()}
        for k, (value, acc, load) in enumerate(reads.loads):
            if _row_indexed(tl, acc):
                terms = [(f"bb_l{k}", 1), *tl.swapped_terms(acc, f"ca_{r}"),
                         *tl.inner_terms(acc, "ci")]
                index = _lane(_u64(tl, tl.sum(terms)), lane * acc.stride(gi))
            else:
                index = _plus(f"l{k}", step * acc.stride(ga) + lane * acc.stride(gi))
            name = f"ld{k}{tag}"
            more, expr = load(index, name)
            loads += [*more, f"{name} = {expr}"]
            bound[value] = name
        ev = PointEvaluator(plan.body, plan.shape, [], bound, suffix=tag)
        values.append([ev.value(v) for v in plan.body.outputs])
        arith += ev.take_lines()
    stores: list[str] = []
    for n, (k, v, acc) in enumerate(reads.stores):
        conds = [f"{_offset(tl, 'ca', step)} < {tl.lit(tl.ext_a)}"] if tail_a else []
        conds += ["ci_raw < " + tl.lit(tl.ext_i)] if tail_i else []
        if step and not acc.stride(ga):
            continue  # broadcast along the swapped axis: row 0 stores it
        conds += _owner_conds(tl, acc, step)
        at = _plus(f"o{k}", step * acc.stride(ga)) if not tl.apart(acc) else _u64(tl, tl.sum(
            [(f"bb_o{k}", 1), *tl.swapped_terms(acc, f"ca_{r}"), *tl.inner_terms(acc, "ci")]))
        line = (wide_store_line(k, v, at, [lane[n] for lane in values]) if side.lanes > 1
                else f"out{k}[{at}] = {store_expr(v, values[0][n])}")
        stores += [f"if {' and '.join(conds)}:", _INDENT + line] if conds else [line]
    return loads, arith, stores


def _owner_conds(tl: _Tiling, acc: LinearAccess, step: int) -> list[str]:
    """A result smaller than the iteration shape is stored by the points at
    coordinate 0 of the axes it is broadcast along (once per element); only
    row 0 (`step` 0) of a thread reaches here for one broadcast along the
    swapped axis."""
    conds: list[str] = []
    for g, group in enumerate(tl.groups):
        if acc.stride(group):
            continue
        coord = "ca" if g == tl.a else (
            "ci_raw" if g == tl.i and tl.j is None else "ci_l" if g == tl.i else
            "ci_h" if g == tl.j else f"b{g}")
        conds.append(f"{coord} == {tl.lit(0)}")
    return conds


def _plan_tiling(plan: TransposedPlan) -> tuple[
        _Tiling, dict[int, tuple[BlockArgument, LinearAccess]], _Reads]:
    tiled, reads = tiled_accesses(plan), _reads(plan)
    return _tiling(plan), tiled, reads


def tiled_lines(plan: TransposedPlan) -> tuple[list[str], tuple[int, int, int], frozenset[str]]:
    """The tiled kernel's body, its grid and the grid axes it loops over."""
    tl, tiled, reads = _plan_tiling(plan)
    named = {f"t{j}": acc for j, (_, acc) in tiled.items()}
    named |= {f"l{k}": acc for k, (_, acc, _) in enumerate(reads.loads)}
    named |= {f"o{k}": acc for k, _, acc in reads.stores}
    inner = [*_batch_lines(tl, named), *_phases(tl, tiled, reads)]
    batch = numel(tuple(numel(tuple(plan.shape[d] for d in tl.groups[g])) for g in tl.batch))
    grid = (-(-tl.ext_i // plan.tile), -(-tl.ext_a // plan.tile), max(1, batch))
    body, looped = block_index_lines([("by", "y", grid[1]), ("bz", "z", grid[2])], inner,
                                     reuses_shared=True)
    pitch = plan.tile + 1
    head = [f"tx = {tl.itype}(cuda.threadIdx.x)", f"ty = {tl.itype}(cuda.threadIdx.y)",
            *(f"tile{j} = cuda.shared.array({plan.tile * pitch}, {tile_type})"
              for j, tile_type in tile_types(plan).items()),
            f"wr = {_u64(tl, f'ty * {tl.lit(pitch)} + tx')}",
            f"rd = {_u64(tl, f'tx * {tl.lit(pitch)} + ty')}",
            f"n0 = {tl.itype}(cuda.blockIdx.x) * {tl.lit(plan.tile)}"]
    return head + body, grid, looped


def _phases(tl: _Tiling, tiled: dict[int, tuple[BlockArgument, LinearAccess]],
             reads: _Reads) -> list[str]:
    """The staging and compute phases: one element per access, or where the
    plan widens a side (`scheduling/tile_vector.py`), the wide phases when
    every array they move as words is aligned to its word, else the scalar
    ones."""
    scalar = [*_load_phase(tl, tiled), *_compute_phase(tl, reads)]
    vec = tl.plan.tile_vector
    if not vec.wide:
        return scalar
    body = tl.plan.body
    arrays = [(f"in{i}", vec.load, dtype_name(body.args[i])) for i in sorted(vec.inputs)]
    if vec.store > 1:
        arrays += [(f"out{k}", vec.store, dtype_name(v)) for k, v in enumerate(body.outputs)]
    tests = alignment_tests((a, lanes * of_device_dtype(d).width) for a, lanes, d in arrays)
    wide = [f"tt = ty * {tl.lit(tl.plan.tile)} + tx",
            *_load_phase(tl, tiled, vec.load, vec.inputs),
            *_compute_phase(tl, reads, vec.store)]
    if not tests:
        return wide
    return [f"if {' and '.join(tests)}:", *(_INDENT + line for line in wide),
            "else:", *(_INDENT + line for line in scalar)]


def tile_types(plan: TransposedPlan) -> dict[int, str]:
    """The numba element type of each shared tile, by tile number."""
    return {j: tile_type(key[0]) for key, j in plan.tiled.items()}  # type: ignore[arg-type]
