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
  16 long) spans the output axis outside it too (`inner_side`,
  `scheduling/transposed_plan.py`): its coordinate splits into the two
  axes' (`ci_h`, `ci_l`) once per thread for the compute phase and once
  per row for the staged loads, so each row of stores is a tile side of
  consecutive outputs.
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

from fusec.analysis.index_types import index_type
from fusec.analysis.view_operands import FOLDED_VIEWS, operand_map, read_directly
from fusec.codegen.computed_root import root_load
from fusec.codegen.kernel_source import int_literal
from fusec.codegen.launch_grid import block_index_lines
from fusec.codegen.point_evaluator import PointEvaluator, load_expr, store_expr
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
    itype: str

    @property
    def ext_a(self) -> int:
        return numel(tuple(self.plan.shape[d] for d in self.groups[self.a]))

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
        return [g for g in range(len(self.groups)) if g not in (self.a, self.i, self.j)]

    def split(self, coord: str) -> list[str]:
        """A coordinate along the innermost side split into its two groups'
        (`{coord}_h`, `{coord}_l`); nothing where the side is one group."""
        if self.j is None:
            return []
        return [f"{coord}_h = {coord} // {self.lit(self.ext_lo)}",
                f"{coord}_l = {coord} % {self.lit(self.ext_lo)}"]

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
    return _Tiling(plan, groups, a, i, j, index_type(2 * largest))


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


def _load_phase(tl: _Tiling, tiled: dict[int, tuple[BlockArgument, LinearAccess]]) -> list[str]:
    """Each staged operand's tile, `threadIdx.x` walking the swapped axis
    (the operand's contiguous one): rows `r * rows` apart."""
    plan, ga, gi = tl.plan, tl.groups[tl.a], tl.groups[tl.i]
    rows, passes = plan.rows, plan.tile // plan.rows
    la = "m0 + tx" if tl.ext_a % plan.tile == 0 else f"min(m0 + tx, {tl.lit(tl.ext_a - 1)})"
    lines = [f"la = {la}", "li = n0 + ty"]
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
        sa, si = acc.stride(ga), acc.stride(gi)
        if not per_row:
            lines.append(f"s{j} = {_u64(tl, tl.sum([(f'bb_t{j}', 1), ('la', sa), ('li', si)]))}")
        for r in range(passes):
            if per_row:
                terms = [(f"bb_t{j}", 1), ("la", sa), *tl.inner_terms(acc, f"li_{r}")]
                index = _u64(tl, tl.sum(terms))
            else:
                index = _plus(f"s{j}", r * rows * si)
            more, expr = root_load(plan.body, arg, index, f"x{j}_{r}")
            loads += [*more, f"x{j}_{r} = {expr}"]
            writes.append(f"tile{j}[{_plus('wr', r * rows * (plan.tile + 1))}] = x{j}_{r}")
    return [*lines, *loads, *writes, "cuda.syncthreads()"]


def _compute_phase(tl: _Tiling, reads: _Reads) -> list[str]:
    """Outputs with `threadIdx.x` walking the innermost axis: all loads,
    then the arithmetic, then the (guarded where tiles pass an edge) stores."""
    plan, ga = tl.plan, tl.groups[tl.a]
    rows, passes = plan.rows, plan.tile // plan.rows
    tail_a, tail_i = tl.ext_a % plan.tile != 0, tl.ext_i % plan.tile != 0
    ci = f"min(ci_raw, {tl.lit(tl.ext_i - 1)})" if tail_i else "ci_raw"
    lines = ["ci_raw = n0 + tx", f"ci = {ci}", *tl.split("ci"), "ca = m0 + ty"]
    if tail_a:
        lines += [f"ca_{r} = min({_offset(tl, 'ca', r * rows)}, {tl.lit(tl.ext_a - 1)})"
                  for r in range(passes)]
    for k, (_, acc, _load) in enumerate(reads.loads):
        if not (tail_a and acc.stride(ga)):
            terms = [(f"bb_l{k}", 1), ("ca", acc.stride(ga)), *tl.inner_terms(acc, "ci")]
            lines.append(f"l{k} = {_u64(tl, tl.sum(terms))}")
    for k, _, acc in reads.stores:
        terms = [(f"bb_o{k}", 1), ("ca", acc.stride(ga)), *tl.inner_terms(acc, "ci")]
        lines.append(f"o{k} = {_u64(tl, tl.sum(terms))}")
    parts = [_row(tl, reads, r) for r in range(passes)]
    return lines + [line for k in range(3) for part in parts for line in part[k]]


def _row(tl: _Tiling, reads: _Reads, r: int) -> tuple[list[str], list[str], list[str]]:
    """Loads, arithmetic and stores of a thread's element in row `r`."""
    plan, ga = tl.plan, tl.groups[tl.a]
    step = r * plan.rows
    tail_a, tail_i = tl.ext_a % plan.tile != 0, tl.ext_i % plan.tile != 0
    bound: dict[SSAValue, str] = {}
    inside = set(plan.body.ops)
    for op in plan.body.ops:
        if isinstance(op, FOLDED_VIEWS) and read_directly(plan.body, op):
            key = operand_map(op, inside)
            if not isinstance(key, str) and key in plan.tiled:
                bound[op.results[0]] = f"tile{plan.tiled[key]}[{_plus('rd', step)}]"
    loads: list[str] = []
    for k, (value, acc, load) in enumerate(reads.loads):
        if tail_a and acc.stride(ga):
            terms = [(f"bb_l{k}", 1), (f"ca_{r}", acc.stride(ga)), *tl.inner_terms(acc, "ci")]
            index = _u64(tl, tl.sum(terms))
        else:
            index = _plus(f"l{k}", step * acc.stride(ga))
        name = f"ld{k}_{r}"
        more, expr = load(index, name)
        loads += [*more, f"{name} = {expr}"]
        bound[value] = name
    ev = PointEvaluator(plan.body, plan.shape, [], bound, suffix=f"_{r}")
    values = [ev.value(v) for v in plan.body.outputs]
    stores: list[str] = []
    for (k, v, acc), val in zip(reads.stores, values, strict=True):
        conds = [f"{_offset(tl, 'ca', step)} < {tl.lit(tl.ext_a)}"] if tail_a else []
        conds += ["ci_raw < " + tl.lit(tl.ext_i)] if tail_i else []
        if step and not acc.stride(ga):
            continue  # broadcast along the swapped axis: row 0 stores it
        conds += _owner_conds(tl, acc, step)
        line = f"out{k}[{_plus(f'o{k}', step * acc.stride(ga))}] = {store_expr(v, val)}"
        stores += [f"if {' and '.join(conds)}:", _INDENT + line] if conds else [line]
    return loads, ev.take_lines(), stores


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
    inner = [*_batch_lines(tl, named), *_load_phase(tl, tiled), *_compute_phase(tl, reads)]
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


def tile_types(plan: TransposedPlan) -> dict[int, str]:
    """The numba element type of each shared tile, by tile number."""
    return {j: tile_type(key[0]) for key, j in plan.tiled.items()}  # type: ignore[arg-type]
