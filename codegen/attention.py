"""Kernels for `kind = "attention"` groups (made by `fuse-attention`):
`softmax(f(Q @ Kᵀ)) @ V` as one kernel, FlashAttention-style, f32 math in
SIMT (f16/bf16 operands are widened as they are staged).

One block per (batch x head, tile of `block_q` queries); the block walks the
keys `block_k` at a time. The tile is the group's `#fusion.attention`
schedule (`scheduling/attention_schedule.py` says which thread owns what):

1. Qᵀ is staged in shared memory once; each step stages Kᵀ and V (with
   `stages = 2` the next step's K/V tile is loaded into registers before
   this step's math and stored into the other buffer after it). The
   transposed tiles' rows are 4 (mod 32) words long, so that a warp staging
   4 rows x 8 head dims (32-byte global sectors) hits 32 distinct banks;
2. each thread accumulates its `rows x cols` scores as outer products of a
   Q fragment (`rows` consecutive queries) and a K fragment (`cols`
   consecutive keys) per head dim: both are vector shared loads (the
   shared tiles are flat, 16-byte aligned and indexed with unsigned offsets
   whose alignment is their last operation, which lets NVVM merge the
   scalar loads: `_unrolled`), then applies the score ops;
3. online softmax: the row maximum across the `lanes` threads of a row group
   (butterfly shuffles) updates the running maximum; accumulators and
   partial row sums are rescaled by `exp(m_old - m_new)`;
4. the probabilities go to a shared tile `P[key][query]` and each thread
   adds `P @ V` to its `rows x dims` accumulators, again from vector
   fragments.

After the last tile the row sums are combined across the lanes and each
output is divided once (and rounded once to its stored type). Q, K, V and
the output are read and written through strided views
(`analysis/strided_view.py`), so the head split of a packed QKV projection
and the merge of the heads after it cost no kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.ir import BlockArgument

from fusec.analysis.attention_pattern import AttentionPattern
from fusec.analysis.group_body import GroupBody
from fusec.analysis.strided_view import StridedView
from fusec.analysis.targets import Target
from fusec.codegen.kernel_source import (
    KernelSource,
    broadcast_index,
    float_literal,
    kernel_header,
    launch_text,
    sanitize_identifier,
    unravel,
)
from fusec.codegen.point_evaluator import PointEvaluator, body_params, indent, load_expr, store_expr
from fusec.codegen.reduction_tree import SIMULATED
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import Shape, fmt, numel
from fusec.scheduling.attention_group import AttentionSizes
from fusec.scheduling.attention_plan import AttentionPlan
from fusec.scheduling.attention_schedule import (
    VECTOR,
    AttentionTile,
    p_width,
    padded,
    shared_words,
    vwidth,
)
from fusec.scheduling.group_plan import GroupPlan

F32 = "float32"
NEG_INF = float_literal(float("-inf"))
ZERO = float_literal(0.0)
FULL_MASK = "0xffffffff"
UNROLL = 4  # fragment-loop steps written out per iteration (`_unrolled`)
ALIGN = 16  # bytes: the shared tiles' alignment, so that fragments load as vectors


def emit(plan: GroupPlan, kernel_name: str, target: Target) -> KernelSource:
    """The kernel of a `kind = "attention"` group (see the module docstring),
    as its plan (`scheduling/attention_plan.py`) says; its tiles are static
    shared arrays when they fit `target`'s static limit."""
    ap = plan.detail_of(AttentionPlan)
    flat, body, pattern, shape, tile = plan.body, ap.body, ap.pattern, ap.sizes, ap.tile
    name = sanitize_identifier(kernel_name)
    qtiles, smem, dynamic = ap.qtiles, ap.shared_bytes, ap.dynamic
    grid = (max(1, numel(shape.batch)) * qtiles, 1, 1)
    block = (tile.threads, 1, 1)
    notes = [
        f"O[{fmt(shape.out)}] = softmax(f(Q[{fmt(tensor_shape(pattern.qk.lhs))}] @ K^T)) @ "
        f"V[{fmt(tensor_shape(pattern.pv.rhs))}], online softmax, scores stay on chip",
        f"tile: {tile.text()}; {'dynamic' if dynamic else 'static'} shared memory "
        f"{smem} bytes",
    ]
    if tile.engine == "mma":
        from fusec.codegen.attention_mma import MmaWriter  # it extends _Writer

        per_thread = f"{tile.block_k // 2} scores and {shape.dv // 2} outputs per thread"
        writer: _Writer = MmaWriter(body, pattern, shape, tile, qtiles, dynamic)
    elif tile.engine == "decode":
        from fusec.codegen.attention_decode import emit_decode  # it extends _Writer

        return emit_decode(flat, body, pattern, shape, tile, name, notes)
    elif tile.splits > 1:
        from fusec.codegen.attention_split import emit_split  # it extends _Writer

        return emit_split(flat, body, pattern, shape, tile, name, notes, target)
    else:
        per_thread = (f"{tile.rows}x{tile.cols} scores and {tile.rows}x"
                      f"{tile.dims(shape.dv)} outputs per thread")
        writer = _Writer(body, pattern, shape, tile, qtiles, dynamic)
    head = kernel_header(flat, body.ops, launch_text(grid, block, per_thread), notes)
    lines = writer.lines()
    text = "\n".join([*head, "@cuda.jit", f"def {name}({body.signature()}):",
                      *indent(lines, 1)])
    # A static kernel requests nothing at launch; a dynamic one, its tiles.
    return KernelSource(name, text, grid, block, body_params(body),
                        shared_bytes=smem if dynamic else 0, notes=notes)


def _u(n: int | str) -> str:
    """An unsigned shared-memory offset: numba indexes with it without the
    negative-index wrap-around, which would hide the fragments' alignment."""
    return f"numba.uint64({n})"


def _plus(base: str, k: int) -> str:
    return f"{base} + {_u(k)}" if k else base


@dataclass(frozen=True)
class _Tile:
    """One operand's shared tile: `rows` keys or queries x `cols` head dims
    (`valid` of them real, zero beyond), stored transposed (`[col][row]`) or
    not, rows `width` words apart."""

    which: str
    rows: int
    cols: int
    valid: int
    transposed: bool
    width: int


class _Writer:
    """Writes the kernel body, unrolled over a thread's fragments: every
    score and accumulator is a scalar variable (`o2_5`), as numba keeps
    indexed local arrays in local memory."""

    # A split-KV block (`codegen/attention_split.py`) starts its keys at `ks`.
    key_start = ""  # prefix of a step's first key `k0`
    first_key = "0"  # the first K/V tile's first key

    def __init__(self, body: GroupBody, p: AttentionPattern, shape: AttentionSizes,
                 tile: AttentionTile, qtiles: int, dynamic: bool = False) -> None:
        self.body, self.p, self.sh, self.t, self.qtiles = body, p, shape, tile, qtiles
        self.dynamic = dynamic
        self.batch_lines, self.bcoords = unravel("bz", shape.batch, prefix="b")
        self.dims = tile.dims(shape.dv)
        d, bk = shape.d, tile.block_k
        self.q = _Tile("q", tile.block_q, d, d, True, padded(tile.block_q))
        self.k = _Tile("k", bk, d, d, True, padded(bk))
        self.v = _Tile("v", bk, vwidth(tile, shape.dv), shape.dv, False, vwidth(tile, shape.dv))
        self.v_offset = d * self.k.width  # V follows K in each K/V buffer
        words = shared_words(tile, d, shape.dv)
        self.kv_words = words["kv"] // tile.stages
        # Where Qᵀ and P start in their array: 0 in their own static arrays;
        # in the one dynamic array, after the K/V buffers, at constant
        # offsets that are whole 16-byte vectors, folded into the fragments'
        # bases (K/V stay at 0: NVVM merges their loads into vectors only
        # there, measured in the PTX).
        self.kv_base = 0
        self.q_base = words["kv"] if dynamic else 0
        self.p_base = words["kv"] + words["q"] if dynamic else 0
        self.steps: int | str = -(-shape.skv // bk)  # the key loop's trips
        # Words each fragment is aligned to: its length's largest power-of-two
        # divisor up to a vector (every tile row and offset is whole vectors).
        self.aq, self.ak, self.av = (_alignment(n) for n in (tile.rows, tile.cols, self.dims))

    def lines(self) -> list[str]:
        t, sh = self.t, self.sh
        out = [
            "tid = cuda.threadIdx.x",
            f"tx = tid % {t.lanes}",
            f"ty = tid // {t.lanes}",
            *self._block_lines(),
            *self.batch_lines,
            *(f"{b}base = {self._base(b)}" for b in ("q", "k", "v", "o")),
            *self._declare(),
            "# Q^T, once",
            *self._stage_loop(self.q, "Qt", str(self.q_base), "q0", sh.s),
            f"fq = {_u(f'ty * {t.rows}')}  # this thread's query rows in a Q^T / P row",
            f"fk = {_u(f'tx * {t.cols}')}  # its keys in a K^T row",
            f"fv = {_u(f'tx * {self.dims}')}  # its head dims in a V row",
            # the same in whole fragment-aligned units (`_unrolled`)
            f"fqu = {_u(f'ty * {t.rows // self.aq}')}",
            f"fku = {_u(f'tx * {t.cols // self.ak}')}",
            f"fvu = {_u(f'tx * {self.dims // self.av}')}",
        ]
        for i in range(t.rows):
            out.append(f"qr{i} = q0 + ty * {t.rows} + {i}")
            out.append(f"qc{i} = min(qr{i}, {sh.s - 1})")  # side inputs of rows past S
            out += [f"m{i} = {NEG_INF}", f"l{i} = {ZERO}"]
            out += [f"o{i}_{d} = {ZERO}" for d in range(self.dims)]
        if t.stages == 2:
            out += ["# the first K/V tile",
                    *self._stage_kv_loop(str(self.kv_base), self.first_key)]
        out += [f"for kt in range({self.steps}):", *indent(self._key_step(), 1),
                *self._finish()]
        return out

    def _block_lines(self) -> list[str]:
        """The block's first query `q0` and batch entry `bz`."""
        return [f"q0 = (cuda.blockIdx.x % {self.qtiles}) * {self.t.block_q}",
                f"bz = cuda.blockIdx.x // {self.qtiles}"]

    def _declare(self) -> list[str]:
        """The flat shared tiles: 16-byte aligned on the GPU (the simulator
        has no alignment), plus the simulator's row exchange. Past numba's
        static 48 KiB the three are one array, the block's dynamic shared
        memory (the launch requests its bytes), at offsets `kv_base` and
        `p_base`: slices of it would bound-check against its run-time size
        and lose the constant alignment the vector loads need."""
        words = shared_words(self.t, self.sh.d, self.sh.dv)
        arrays = [("Qt", words["q"]), ("KV", words["kv"]), ("Ps", words["p"])]
        xs = (f"Xs = cuda.shared.array(({self.t.rows}, {self.t.row_groups}, "
              f"{self.t.lanes}), {F32})")
        if self.dynamic:
            alias = ["Qt = SM", "KV = SM", "Ps = SM"]
            sim = [f"SM = cuda.shared.array(0, {F32})", *alias, xs]
            gpu = [f"SM = cuda.shared.array(0, {F32}, alignment={ALIGN})", *alias]
        else:
            sim = [*(f"{n} = cuda.shared.array({w}, {F32})" for n, w in arrays), xs]
            gpu = [f"{n} = cuda.shared.array({w}, {F32}, alignment={ALIGN})" for n, w in arrays]
        return [f"if {SIMULATED}:", *indent(sim, 1), "else:", *indent(gpu, 1)]

    def _base(self, which: str) -> str:
        """The part of an operand's index fixed by the block's batch entry."""
        view = self._view(which)
        rank = len(view.shape) - 2
        coords = self.bcoords[len(self.bcoords) - rank:] if rank else []
        batch = StridedView(view.shape[:-2], view.strides[:-2], view.offset)
        return batch.index(coords)

    def _view(self, which: str) -> StridedView:
        return self.p.output_view() if which == "o" else self.p.source_view(which)

    def _strides(self, which: str) -> tuple[int, int]:
        """(stride along the tile's rows, along its head dims) in the source."""
        view = self._view(which)
        if which == "k":  # the source is Kᵀ: [D, Skv]
            return view.strides[-1], view.strides[-2]
        return view.strides[-2], view.strides[-1]

    def _mapping(self, tile: _Tile) -> tuple[str, str, int]:
        """(row, col, count) of element `idx` of a staging walk: a warp reads
        along the source's unit-stride side; a transposed tile read along
        its head dims goes in blocks of 4 rows x 8 dims (conflict-free
        stores into the skewed rows)."""
        r_stride, c_stride = self._strides(tile.which)
        if tile.transposed and c_stride == 1 and tile.rows % 4 == 0 and r_stride != 1:
            rb = tile.rows // 4
            count = rb * -(-tile.cols // 8) * 32
            return (f"(idx // 32 % {rb}) * 4 + idx % 4",
                    f"(idx // {32 * rb}) * 8 + idx // 4 % 8", count)
        if r_stride == 1 or (tile.transposed and c_stride != 1):
            return f"idx % {tile.rows}", f"idx // {tile.rows}", tile.rows * tile.cols
        return f"idx // {tile.cols}", f"idx % {tile.cols}", tile.rows * tile.cols

    def _element(self, tile: _Tile, origin: str, limit: int) -> tuple[list[str], str, str]:
        """(lines setting r, c, gr; the loaded value; the store guard) of
        element `idx` of `tile`."""
        r_expr, c_expr, count = self._mapping(tile)
        r_stride, c_stride = self._strides(tile.which)
        src = self.p.source(tile.which)
        assert isinstance(src, BlockArgument)
        load = load_expr(self.body, src, f"{tile.which}base + gr * {r_stride} + c * {c_stride}")
        guard = [f"idx < {count}"] if count % self.t.threads else []
        if tile.transposed and tile.cols % 8:
            guard.append(f"c < {tile.cols}")
        valid = [*guard]
        if limit % tile.rows:
            valid.append(f"gr < {limit}")
        if tile.valid != tile.cols:
            valid.append(f"c < {tile.valid}")
        value = f"{load} if {' and '.join(valid)} else {ZERO}" if valid else load
        lines = [f"r = {r_expr}", f"c = {c_expr}", f"gr = {origin} + r"]
        return lines, value, " and ".join(guard)

    def _dest(self, tile: _Tile, offset: str) -> str:
        at = "c * {w} + r" if tile.transposed else "r * {w} + c"
        return f"{offset} + " + at.format(w=tile.width) if offset != "0" else at.format(
            w=tile.width)

    def _stores(self, array: str, dest: str, value: str) -> list[str]:
        """The lines storing a staged `value` at `array[dest]`."""
        return [f"{array}[{dest}] = {value}"]

    def _count(self, tile: _Tile) -> int:
        return -(-self._mapping(tile)[2] // self.t.threads)

    def _stage_loop(self, tile: _Tile, array: str, offset: str, origin: str,
                    limit: int) -> list[str]:
        """Global -> shared, a loop over the elements of each thread."""
        lines, value, guard = self._element(tile, origin, limit)
        stores = self._stores(array, self._dest(tile, offset), value)
        inner = [*lines, *([f"if {guard}:", *indent(stores, 1)] if guard else stores)]
        return [f"for e in range({self._count(tile)}):",
                f"    idx = tid + e * {self.t.threads}", *indent(inner, 1)]

    def _stage_kv_loop(self, buffer: str, origin: str) -> list[str]:
        return [*self._stage_loop(self.k, "KV", buffer, origin, self.sh.skv),
                *self._stage_loop(self.v, "KV", f"{buffer} + {self.v_offset}" if buffer != "0"
                                  else str(self.v_offset), origin, self.sh.skv)]

    def _prefetch(self) -> tuple[list[str], list[str]]:
        """(loads of the next K/V tile into `pf<n>`, their stores into the
        other buffer): unrolled, so the loads are in flight during the math."""
        loads: list[str] = []
        stores: list[str] = []
        n = 0
        for tile, offset in ((self.k, "nb"), (self.v, f"nb + {self.v_offset}")):
            for e in range(self._count(tile)):
                lines, value, guard = self._element(tile, "k1", self.sh.skv)
                idx = [f"idx = tid + {e * self.t.threads}"]
                if guard:
                    value = f"({value}) if {guard} else {ZERO}"
                loads += [*idx, *lines, f"pf{n} = {value}"]
                store = self._stores("KV", self._dest(tile, offset), f"pf{n}")
                stores += [*idx, *lines[:2], *([f"if {guard}:", *indent(store, 1)] if guard
                                               else store)]
                n += 1
        return loads, stores

    def _key_step(self) -> list[str]:
        t = self.t
        lines = [f"k0 = {self.key_start}kt * {t.block_k}",
                 "cuda.syncthreads()  # the last step's tiles are read"]
        stores: list[str] = []
        if t.stages == 2:
            loads, stores = self._prefetch()
            lines += [f"cbi = {_plus_int(self.kv_base, f'(kt % 2) * {self.kv_words}')}",
                      f"k1 = k0 + {t.block_k}",
                      f"if kt + 1 < {self.steps}:", *indent(loads, 1)]
        else:
            lines += [f"cbi = {self.kv_base}", *self._stage_kv_loop(str(self.kv_base), "k0"),
                      "cuda.syncthreads()"]
        lines += [*(["cbs = numba.uint64(kt % 2)  # this step's K/V buffer"] if t.stages == 2
                    else []), *self._qk(), *self._scores(), *self._online_softmax(),
                  "cuda.syncthreads()", *self._pv()]
        if stores:
            lines += [f"if kt + 1 < {self.steps}:",
                      f"    nb = {_plus_int(self.kv_base, f'((kt + 1) % 2) * {self.kv_words}')}",
                      *indent(stores, 1)]
        return lines

    def _qk(self) -> list[str]:
        """`s<i>_<j>`: outer products of the Q and K fragments over the head dims."""
        t, keys = self.t, range(self.t.cols)

        def step(c: int) -> list[str]:
            return [*(f"fq{i} = Qt[{_plus('qa', c * self.q.width + i)}]" for i in range(t.rows)),
                    *(f"fk{j} = KV[{_plus('ka', c * self.k.width + j)}]" for j in keys),
                    *(f"s{i}_{j} = cuda.fma(fq{i}, fk{j}, s{i}_{j})"
                      for i in range(t.rows) for j in keys)]

        return [*(f"s{i}_{j} = {ZERO}" for i in range(t.rows) for j in keys),
                *_unrolled("d", self.sh.d, [_Base("qa", "fqu", self.q_base, self.q.width, self.aq),
                                            self._kv_base("ka", "fku", 0, self.k.width, self.ak)],
                           step)]

    def _pv(self) -> list[str]:
        """The accumulators += P fragment x V fragment, over the tile's keys."""
        t = self.t

        def step(c: int) -> list[str]:
            return [*(f"pp{i} = Ps[{_plus('pa', c * p_width(t) + i)}]" for i in range(t.rows)),
                    *(f"vv{d} = KV[{_plus('va', c * self.v.width + d)}]"
                      for d in range(self.dims)),
                    *(f"o{i}_{d} = cuda.fma(pp{i}, vv{d}, o{i}_{d})"
                      for i in range(t.rows) for d in range(self.dims))]

        return _unrolled("kk", t.block_k, [
            _Base("pa", "fqu", self.p_base, p_width(t), self.aq),
            self._kv_base("va", "fvu", self.v_offset, self.v.width, self.av)], step)

    def _kv_base(self, name: str, own: str, offset: int, width: int, unit: int) -> _Base:
        """A K or V fragment base: `offset` words into this step's K/V buffer."""
        stage = self.kv_words if self.t.stages == 2 else 0
        return _Base(name, own, self.kv_base + offset, width, unit, stage)

    def _scores(self) -> list[str]:
        """`x<i>_<j>`: the score ops applied to each raw score; keys past the
        end score -inf."""
        t, sh = self.t, self.sh
        lines = [f"kc{j} = k0 + tx * {t.cols} + {j}" for j in range(t.cols)]
        ragged = sh.skv % t.block_k != 0
        if ragged:
            lines += [f"kk{j} = min(kc{j}, {sh.skv - 1})" for j in range(t.cols)]
        for i in range(t.rows):
            for j in range(t.cols):
                lines += self._score(f"x{i}_{j}", f"s{i}_{j}", f"qc{i}",
                                     f"kk{j}" if ragged else f"kc{j}",
                                     f"kc{j} < {sh.skv}" if ragged else None, f"_{i}_{j}")
        return lines

    def _score(self, out: str, raw: str, query: str, key: str, live: str | None,
               suffix: str) -> list[str]:
        """`out`: the score ops applied to the raw score `raw` at (`query`,
        `key`), every engine's way; -inf where `live` (a condition) fails."""
        ev = PointEvaluator(self.body, tensor_shape(self.p.qk.result),
                            [*self.bcoords, query, key], {self.p.qk.result: raw},
                            loader=self._side_input, suffix=suffix)
        value = ev.value(self.p.scores)
        keep = f" if {live} else {NEG_INF}" if live else ""
        return [*ev.take_lines(), f"{out} = {F32}({value}){keep}"]

    def _side_input(self, arg: BlockArgument, shape: Shape, coords: Sequence[str]) -> str:
        """A score op's input (a mask, a bias) at the score's coordinates,
        indexed in unsigned math: the coordinates are never negative, and
        numba's wrap-around of negative indices cost 64-bit instructions per
        score (an additive mask, f32 128 x 32 mma tile: 1412 -> 1314 PTX
        instructions)."""
        coords = [_u(c) for c in coords]
        index = broadcast_index(shape, tensor_shape(self.p.qk.result), coords, itype="numba.uint64")
        return load_expr(self.body, arg, index)

    def _online_softmax(self) -> list[str]:
        t = self.t
        keys = range(t.cols)
        lines = [f"t{i} = {_fold('max', [f'x{i}_{j}' for j in keys])}" for i in range(t.rows)]
        lines += self._across_lanes("max")
        lines.append(f"pw = {_plus(f'fk * {_u(p_width(t))} + fq', self.p_base)}"
                     "  # P[key][query] of this thread")
        for i in range(t.rows):
            lines += [
                f"n{i} = max(m{i}, t{i})",
                f"mb{i} = select(n{i} > {NEG_INF}, n{i}, {ZERO})  # rows masked so far: no NaN",
                f"a{i} = fast_exp(m{i} - mb{i})",
                f"m{i} = n{i}",
                *(f"p{i}_{j} = fast_exp(x{i}_{j} - mb{i})" for j in keys),
                f"l{i} = l{i} * a{i} + {_fold('+', [f'p{i}_{j}' for j in keys])}",
                *(f"o{i}_{d} = o{i}_{d} * a{i}" for d in range(self.dims)),
                *(f"Ps[{_plus('pw', j * p_width(t) + i)}] = p{i}_{j}" for j in keys),
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
        """Row sums across the lanes, then each output divided once, rounded
        to its stored type and stored."""
        t, sh = self.t, self.sh
        view = self._view("o")
        rs, ds = view.strides[-2], view.strides[-1]
        lines = ["# each lane summed its own keys: combine them",
                 *(f"t{i} = l{i}" for i in range(t.rows)), *self._across_lanes("sum"),
                 f"oc = tx * {self.dims}"]
        ragged = self.dims * t.lanes != sh.dv
        for i in range(t.rows):
            stores = [f"inv = {float_literal(1.0)} / t{i}"]
            for d in range(self.dims):
                value = store_expr(self.p.output, f"o{i}_{d} * inv")
                store = f"out0[obase + qr{i} * {rs} + (oc + {d}) * {ds}] = {value}"
                stores += [f"if oc + {d} < {sh.dv}:", f"    {store}"] if ragged else [store]
            lines += [f"if qr{i} < {sh.s}:", *indent(stores, 1)] if sh.s % t.block_q else stores
        return lines


def _alignment(n: int) -> int:
    """The largest power of two up to a vector that divides `n`."""
    return next(a for a in (VECTOR, 2, 1) if n % a == 0)


@dataclass(frozen=True)
class _Base:
    """Where a fragment loop reads one operand: the thread's offset `own`
    (a variable counted in `unit`s), plus `start` words, plus `stage` words
    per K/V buffer index `cbs`, plus `width` words per loop step."""

    name: str
    own: str
    start: int
    width: int
    unit: int
    stage: int = 0


def _unrolled(var: str, trips: int, bases: list[_Base],
              step: Callable[[int], list[str]]) -> list[str]:
    """A fragment loop of `trips` steps, `UNROLL` (or the largest divisor of
    `trips` below it) to an iteration. Each of `bases` is set once per
    iteration, counted in its `unit`s and multiplied by `unit` last;
    `step(c)` reads the fragments at constant offsets `c * width` from it.
    Written out so, the offset's alignment is in its last operation, where
    NVVM sees it, and every fragment load is a vector load; loop-carried
    offsets (`+= width`) or the unroller's own copies left some of them
    scalar (measured in the PTX of the legal tiles)."""
    u = next(n for n in range(min(UNROLL, trips), 0, -1) if trips % n == 0)
    lines = [f"for {var} in range({trips // u}):"]
    for b in bases:
        terms = [b.own, f"{_u(var)} * {_u(u * b.width // b.unit)}"]
        terms += [_u(b.start // b.unit)] if b.start else []
        terms += [f"cbs * {_u(b.stage // b.unit)}"] if b.stage else []
        units = " + ".join(terms)
        lines.append(f"    {b.name} = ({units}) * {_u(b.unit)}" if b.unit > 1
                     else f"    {b.name} = {units}")
    for c in range(u):
        lines += indent(step(c), 1)
    return lines


def _plus_int(base: int, expr: str) -> str:
    """`base + expr` as a signed expression, just `expr` when `base` is 0."""
    return f"{base} + {expr}" if base else expr


def _fold(how: str, names: list[str]) -> str:
    """`max(a, max(b, c))` or `(a + b + c)`."""
    if how == "+":
        return "(" + " + ".join(names) + ")"
    text = names[-1]
    for n in reversed(names[:-1]):
        text = f"max({n}, {text})"
    return text

