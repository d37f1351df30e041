"""Kernels for `kind = "attention"` groups (made by `fuse-attention`):
`softmax(f(Q @ Kᵀ)) @ V` as one kernel, FlashAttention-style, in f32 SIMT.

One block per (batch x head, tile of `block_q` queries); the block walks the
keys `block_k` at a time:

1. the Q tile is staged in shared memory once; each step stages a K and a V
   tile (rows padded by one word, so both the staging stores and the reads
   of a warp hit distinct banks);
2. each thread computes its `rows x keys` scores from shared memory and
   applies the group's score ops (scale, masks) in registers;
3. online softmax: the tile's row maximum (warp shuffles across the `lanes`
   threads of a row group) updates the running maximum; the accumulators and
   the thread's partial row sum are rescaled by `exp(m_old - m_new)`;
4. the probabilities go to a shared tile `Ps[key][row]` and each thread adds
   `P @ V` to its `rows x dims` output accumulators.

After the last tile the row sums are combined across the lanes and each
output is divided once. The scores never leave the SM. Q, K, V and the output
are read and written through strided views (`analysis/strided_view.py`), so
the head split of a packed QKV projection and the merge of the heads after it
cost no kernel. The schedule is `codegen/attention_schedule.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import BlockArgument

from fusec.analysis.attention_pattern import AttentionPattern, match_attention
from fusec.analysis.diagnostics import op_error
from fusec.analysis.strided_view import StridedView
from fusec.analysis.targets import DEFAULT_TARGET, get_target
from fusec.codegen.attention_schedule import (
    AttentionTile,
    attention_registers,
    choose_tile,
    recorded_tile,
    shared_bytes,
)
from fusec.codegen.decompose_group import decomposed
from fusec.codegen.group_body import GroupBody, PointEvaluator, indent
from fusec.codegen.kernel_source import (
    KernelSource,
    float_literal,
    kernel_header,
    launch_text,
    sanitize_identifier,
    unravel,
)
from fusec.codegen.reduction_tree import SIMULATED
from fusec.codegen.register_model import RegisterEstimate
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import Shape, fmt, numel

F32 = "float32"
NEG_INF = float_literal(float("-inf"))
ZERO = float_literal(0.0)
FULL_MASK = "0xffffffff"


def find_pattern(body: GroupBody) -> AttentionPattern:
    """The attention of a group body, which must hold nothing else."""
    for op in body.ops:
        found = match_attention(op, lambda o: o.name)
        if found is None:
            continue
        if not isinstance(found, AttentionPattern):
            raise op_error(body.group, f"cannot generate this attention group: {found.reason}")
        extra = [o for o in body.ops if o not in found.ops() and not isinstance(o, nn.ConstantOp)]
        if extra or body.outputs != [found.output]:
            raise op_error(body.group, "an attention group must hold one attention and "
                           "nothing else, and yield its output")
        for which in ("q", "k", "v"):
            if not isinstance(found.source(which), BlockArgument):
                raise op_error(body.group, f"the {which} operand of an attention group must "
                               "be a group input or a view of one")
        return found
    raise op_error(body.group, "an attention group must hold softmax(f(Q @ K^T)) @ V")


def _check_tile(group: GroupOp, tile: AttentionTile) -> None:
    ok = tile.lanes in (1, 2, 4, 8, 16, 32) and tile.block_q % tile.rows == 0 and \
        tile.block_k % tile.lanes == 0 and tile.threads <= 1024 and tile.rows > 0
    if not ok:
        raise op_error(group, f"attention tile {tile} is invalid: lanes must be a power of two "
                       "<= 32 dividing block_k, rows must divide block_q, at most 1024 threads")


def emit(group: GroupOp, kernel_name: str) -> KernelSource:
    """The kernel of a `kind = "attention"` group (see the module docstring)."""
    with decomposed(group) as flat:
        body = GroupBody.of(flat)
        pattern = find_pattern(body)
        shape = _Shape.of(pattern)
        tile = recorded_tile(group) or _default_tile(shape, len(body.args) + 1)
        if isinstance(tile, str):
            raise op_error(group, f"cannot generate this attention group: {tile}")
        _check_tile(group, tile)
        name = sanitize_identifier(kernel_name)
        qtiles = -(-shape.s // tile.block_q)
        grid = (max(1, numel(shape.batch)) * qtiles, 1, 1)
        block = (tile.threads, 1, 1)
        smem = shared_bytes(tile, shape.d, shape.dv)
        notes = [
            f"O[{fmt(shape.out)}] = softmax(f(Q[{fmt(tensor_shape(pattern.qk.lhs))}] @ K^T)) @ "
            f"V[{fmt(tensor_shape(pattern.pv.rhs))}], online softmax, scores stay on chip",
            f"tile: {tile.text()}; static shared memory {smem} bytes",
        ]
        per_thread = f"{tile.rows} query rows x {tile.dims(shape.dv)} head dims per thread"
        head = kernel_header(flat, body.ops, launch_text(grid, block, per_thread), notes)
        lines = _Writer(body, pattern, shape, tile, qtiles).lines()
        text = "\n".join([*head, "@cuda.jit", f"def {name}({body.signature()}):",
                          *indent(lines, 1)])
        return KernelSource(name, text, grid, block, body.params(), shared_bytes=0, notes=notes)


def group_tile(group: GroupOp) -> tuple[AttentionTile, _Shape, int]:
    """The tile of an attention group (recorded, else chosen for h200), its
    sizes and its kernel's parameter count."""
    with decomposed(group) as flat:
        body = GroupBody.of(flat)
        shape = _Shape.of(find_pattern(body))
    params = len(body.args) + 1
    tile = recorded_tile(group) or _default_tile(shape, params)
    if isinstance(tile, str):
        raise op_error(group, f"cannot generate this attention group: {tile}")
    return tile, shape, params


def group_registers(group: GroupOp) -> RegisterEstimate:
    """The register estimate of an attention group's kernel."""
    tile, shape, params = group_tile(group)
    return attention_registers(tile, shape.dv, params)


def _default_tile(shape: _Shape, params: int) -> AttentionTile | str:
    return choose_tile(get_target(DEFAULT_TARGET), max(1, numel(shape.batch)), shape.s,
                       shape.skv, shape.d, shape.dv, params)


@dataclass(frozen=True)
class _Shape:
    """Sizes of one attention: batch (x heads), queries, keys, head dims."""

    batch: Shape
    s: int
    skv: int
    d: int
    dv: int

    @property
    def out(self) -> Shape:
        return (*self.batch, self.s, self.dv)

    @staticmethod
    def of(p: AttentionPattern) -> _Shape:
        scores = tensor_shape(p.qk.result)
        return _Shape(scores[:-2], scores[-2], scores[-1], tensor_shape(p.qk.lhs)[-1],
                      tensor_shape(p.pv.rhs)[-1])


def attention_shape(p: AttentionPattern) -> tuple[int, int, int, int, int]:
    """(batch x heads, queries, keys, head dim, value head dim)."""
    s = _Shape.of(p)
    return max(1, numel(s.batch)), s.s, s.skv, s.d, s.dv


class _Writer:
    """Writes the kernel body, unrolled over a thread's rows, keys and dims:
    every accumulator is a scalar variable (`o2_5`), as numba keeps indexed
    local arrays in local memory."""

    def __init__(self, body: GroupBody, p: AttentionPattern, shape: _Shape,
                 tile: AttentionTile, qtiles: int) -> None:
        self.body, self.p, self.sh, self.t, self.qtiles = body, p, shape, tile, qtiles
        self.batch_lines, self.bcoords = unravel("bz", shape.batch, prefix="b")
        self.dims = tile.dims(shape.dv)
        self.vwidth = self.dims * tile.lanes  # V tile columns, zero beyond dv

    def lines(self) -> list[str]:
        t, sh = self.t, self.sh
        rg = t.row_groups
        out = [
            "tid = cuda.threadIdx.x",
            f"tx = tid % {t.lanes}",
            f"ty = tid // {t.lanes}",
            f"q0 = (cuda.blockIdx.x % {self.qtiles}) * {t.block_q}",
            f"bz = cuda.blockIdx.x // {self.qtiles}",
            *self.batch_lines,
            *(f"{b}base = {self._base(b)}" for b in ("q", "k", "v", "o")),
            f"Qs = cuda.shared.array(({t.block_q}, {sh.d + 1}), {F32})",
            f"Ks = cuda.shared.array(({t.block_k}, {sh.d + 1}), {F32})",
            f"Vs = cuda.shared.array(({t.block_k}, {self.vwidth}), {F32})",
            f"Ps = cuda.shared.array(({t.block_k}, {t.block_q + t.p_pad()}), {F32})",
            f"Xs = cuda.shared.array(({t.rows}, {rg}, {t.lanes}), {F32})",
            "# the Q tile, once",
            *self._stage("q", "Qs", "q0", t.block_q, sh.s, sh.d),
        ]
        for i in range(t.rows):
            out.append(f"qr{i} = q0 + ty + {i * rg}")
            out.append(f"qc{i} = min(qr{i}, {sh.s - 1})")  # side inputs of rows past S
            out += [f"m{i} = {NEG_INF}", f"l{i} = {ZERO}"]
            out += [f"o{i}_{d} = {ZERO}" for d in range(self.dims)]
        out += [f"for kt in range({-(-sh.skv // t.block_k)}):",
                *indent(self._key_step(), 1), *self._finish()]
        return out

    def _base(self, which: str) -> str:
        """The part of an operand's index fixed by the block's batch entry."""
        view = self._view(which)
        rank = len(view.shape) - 2
        coords = self.bcoords[len(self.bcoords) - rank:] if rank else []
        batch = StridedView(view.shape[:-2], view.strides[:-2], view.offset)
        return batch.index(coords)

    def _view(self, which: str) -> StridedView:
        return self.p.output_view() if which == "o" else self.p.source_view(which)

    def _arg(self, which: str) -> str:
        src = self.p.source(which)
        assert isinstance(src, BlockArgument)
        return f"in{self.body.arg_index(src)}"

    def _stage(self, which: str, tile: str, origin: str, rows: int, limit: int,
               cols: int, width: int | None = None) -> list[str]:
        """Global -> shared: `rows` rows of `which` from row `origin` (zero
        past `limit` rows or `cols` columns); threads walk along the operand's
        unit-stride side so that the loads are coalesced."""
        view = self._view(which)
        r_stride, c_stride = view.strides[-2], view.strides[-1]
        if which == "k":  # Kᵀ: [D, Skv]
            r_stride, c_stride = c_stride, r_stride
        width = width or cols
        total, threads = rows * width, self.t.threads
        by_rows = c_stride != 1 and r_stride == 1
        r, c = ("idx % " + str(rows), "idx // " + str(rows)) if by_rows else \
            ("idx // " + str(width), "idx % " + str(width))
        load = f"{self._arg(which)}[{which}base + gr * {r_stride} + c * {c_stride}]"
        valid = [f"gr < {limit}"] if limit % rows else []
        if width != cols:
            valid.append(f"c < {cols}")
        value = f"{load} if {' and '.join(valid)} else {ZERO}" if valid else load
        inner = [f"r = {r}", f"c = {c}", f"gr = {origin} + r", f"{tile}[r, c] = {value}"]
        loop = [f"for e in range({-(-total // threads)}):", f"    idx = tid + e * {threads}"]
        if total % threads:
            return [*loop, f"    if idx < {total}:", *indent(inner, 2)]
        return [*loop, *indent(inner, 1)]

    def _key_step(self) -> list[str]:
        t, sh = self.t, self.sh
        rg, keys = t.row_groups, t.keys()
        lines = [f"k0 = kt * {t.block_k}", "cuda.syncthreads()  # the last step's tiles are read",
                 *self._stage("k", "Ks", "k0", t.block_k, sh.skv, sh.d),
                 *self._stage("v", "Vs", "k0", t.block_k, sh.skv, sh.dv, self.vwidth),
                 "cuda.syncthreads()"]
        lines += [f"s{i}_{j} = {ZERO}" for i in range(t.rows) for j in range(keys)]
        lines += [f"for d in range({sh.d}):",
                  *(f"    fq{i} = Qs[ty + {i * rg}, d]" for i in range(t.rows)),
                  *(f"    fk{j} = Ks[tx + {j * t.lanes}, d]" for j in range(keys)),
                  *(f"    s{i}_{j} = cuda.fma(fq{i}, fk{j}, s{i}_{j})"
                    for i in range(t.rows) for j in range(keys))]
        lines += self._scores()
        lines += self._online_softmax()
        lines += ["cuda.syncthreads()",
                  f"for kk in range({t.block_k}):",
                  *(f"    pp{i} = Ps[kk, ty + {i * rg}]" for i in range(t.rows)),
                  *(f"    vv{d} = Vs[kk, tx + {d * t.lanes}]" for d in range(self.dims)),
                  *(f"    o{i}_{d} = cuda.fma(pp{i}, vv{d}, o{i}_{d})"
                    for i in range(t.rows) for d in range(self.dims))]
        return lines

    def _scores(self) -> list[str]:
        """`x<i>_<j>`: the score ops applied to each raw score; keys past the
        end score -inf."""
        t, sh = self.t, self.sh
        lines = [f"kc{j} = k0 + tx + {j * t.lanes}" for j in range(t.keys())]
        ragged = sh.skv % t.block_k != 0
        if ragged:
            lines += [f"kk{j} = min(kc{j}, {sh.skv - 1})" for j in range(t.keys())]
        domain = tensor_shape(self.p.qk.result)
        for i in range(t.rows):
            for j in range(t.keys()):
                coords = [*self.bcoords, f"qc{i}", f"kk{j}" if ragged else f"kc{j}"]
                ev = PointEvaluator(self.body, domain, coords, {self.p.qk.result: f"s{i}_{j}"},
                                    suffix=f"_{i}_{j}")
                value = ev.value(self.p.scores)
                lines += ev.take_lines()
                keep = f"if kc{j} < {sh.skv} else {NEG_INF}" if ragged else ""
                lines.append(f"x{i}_{j} = {value} {keep}".rstrip())
        return lines

    def _online_softmax(self) -> list[str]:
        t = self.t
        keys = range(t.keys())
        lines = [f"t{i} = {_fold('max', [f'x{i}_{j}' for j in keys])}" for i in range(t.rows)]
        lines += self._across_lanes("max")
        for i in range(t.rows):
            lines += [
                f"n{i} = max(m{i}, t{i})",
                f"b{i} = n{i} if n{i} > {NEG_INF} else {ZERO}  # rows masked so far: no NaN",
                f"a{i} = math.exp(m{i} - b{i})",
                f"m{i} = n{i}",
                *(f"p{i}_{j} = math.exp(x{i}_{j} - b{i})" for j in keys),
                f"l{i} = l{i} * a{i} + {_fold('+', [f'p{i}_{j}' for j in keys])}",
                *(f"o{i}_{d} = o{i}_{d} * a{i}" for d in range(self.dims)),
                *(f"Ps[tx + {j * t.lanes}, ty + {i * t.row_groups}] = p{i}_{j}" for j in keys),
            ]
        return lines

    def _across_lanes(self, how: str) -> list[str]:
        """`t<i>` of every lane of a row group replaced by the group's max or
        sum: butterfly shuffles on the GPU, the shared exchange `Xs` in the
        simulator (which has no shuffles)."""
        t = self.t
        comb = "max({a}, {b})" if how == "max" else "({a} + {b})"
        sim = [f"Xs[{i}, ty, tx] = t{i}" for i in range(t.rows)] + ["cuda.syncthreads()"]
        for i in range(t.rows):
            sim.append(f"t{i} = Xs[{i}, ty, 0]")
            sim += [f"t{i} = {comb.format(a=f't{i}', b=f'Xs[{i}, ty, {k}]')}"
                    for k in range(1, t.lanes)]
        sim.append("cuda.syncthreads()")
        gpu: list[str] = []
        step = t.lanes // 2
        while step >= 1:
            gpu += [f"t{i} = " + comb.format(
                a=f"t{i}", b=f"cuda.shfl_xor_sync({FULL_MASK}, t{i}, {step})")
                for i in range(t.rows)]
            step //= 2
        return [f"if {SIMULATED}:", *indent(sim, 1), "else:", *indent(gpu or ["pass"], 1)]

    def _finish(self) -> list[str]:
        """Row sums across the lanes, then each output divided once and stored."""
        t, sh = self.t, self.sh
        view = self._view("o")
        rs, ds = view.strides[-2], view.strides[-1]
        lines = ["# each lane summed its own keys: combine them",
                 *(f"t{i} = l{i}" for i in range(t.rows)), *self._across_lanes("sum")]
        for i in range(t.rows):
            stores = [f"inv = {float_literal(1.0)} / t{i}"]
            for d in range(self.dims):
                col = f"tx + {d * t.lanes}"
                store = f"out0[obase + qr{i} * {rs} + ({col}) * {ds}] = o{i}_{d} * inv"
                stores += [f"if {col} < {sh.dv}:", f"    {store}"] if sh.dv % t.lanes else [store]
            lines += [f"if qr{i} < {sh.s}:", *indent(stores, 1)] if sh.s % t.block_q else stores
        return lines


def _fold(how: str, names: list[str]) -> str:
    """`max(a, max(b, c))` or `(a + b + c)`."""
    if how == "+":
        return "(" + " + ".join(names) + ")"
    text = names[-1]
    for n in reversed(names[:-1]):
        text = f"max({n}, {text})"
    return text

