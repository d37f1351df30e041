"""The tensor-core engine of `kind = "attention"` kernels (a schedule with
`engine = "mma"`): `softmax(f(Q @ Kᵀ)) @ V` as one kernel whose two products
run as warp-level `mma.sync` (`codegen/mma.py`: f32 as TF32x3, f16 and bf16
natively, f32 accumulation), FlashAttention-2 style.

One block per (batch x head, tile of `block_q` queries), a warp per 16 of
its queries (`scheduling/attention_mma_schedule.py` has the geometry):

1. Q is staged in shared memory once, in the order of the warps' A
   fragments (`_q_slot`), and read each key step; each key step stages K
   (`[key][dim]`) and Vᵀ (`[dim][key]`) with conflict-free stores (with
   `stages = 2` the next step's tile is loaded into registers before this
   step's math and stored into the other buffer after it); a mask's or a
   bias's loads go before the products (`_early_scores`);
2. the scores of a warp are `block_k / 8` accumulator fragments of
   `Q @ Kᵀ`, a product per 8 head dims; the score ops (scale, masks) are
   applied to each element at its (query, key);
3. online softmax: each lane holds two query rows; their maxima and sums
   combine across the 4 lanes of a row (`xor_lanes`), the accumulators are
   rescaled by `exp(m_old - m_new)`;
4. the probabilities' fragments are the A operands of `P @ V` as they are
   (the fragment layout of `codegen/mma.py`), so P never leaves the
   registers; in f16/bf16 they are rounded to the operands' type there, as
   FlashAttention rounds them.

After the last step each output is divided by its row sum once and rounded
once to its stored type. Operands are read through their strided views, as
the SIMT engine (`codegen/attention.py`) reads them, whose staging code
this engine shares.
"""

from __future__ import annotations

import re

from xdsl.ir import BlockArgument

from fusec.analysis.attention_pattern import AttentionPattern
from fusec.analysis.group_body import GroupBody
from fusec.analysis.targets import WARP_SIZE
from fusec.codegen.attention import (
    ALIGN,
    F32,
    NEG_INF,
    ZERO,
    _fold,
    _plus,
    _Tile,
    _u,
    _Writer,
)
from fusec.codegen.kernel_source import float_literal, unravel
from fusec.codegen.mma import mma_helpers, mma_row
from fusec.codegen.point_evaluator import indent, load_expr, store_expr
from fusec.codegen.reduction_tree import SIMULATED
from fusec.scheduling.attention_group import AttentionSizes
from fusec.scheduling.attention_mma_schedule import (
    mma_shared_words,
    mma_widths,
    split_offsets,
    staged_parts,
)
from fusec.scheduling.attention_schedule import MMA_K, MMA_ROWS, AttentionTile

VEC = 4  # head dims a thread stages per step
QUAD_STEPS = 2  # exchanges that combine the 4 lanes of a row (distances 1, 2)
# The temporaries of one staged vector, given a name of their own per tile
# (and per unrolled step) by `_own_names`.
STAGING_NAMES = ("e", "u", "r", "c", "gr", "at", "qd", *(f"v{i}" for i in range(VEC)))


class MmaWriter(_Writer):
    """Writes the body of an mma tile's kernel: the SIMT writer's staging
    (its `_stage_loop`, `_prefetch` and key-step skeleton) with mma tiles
    (Q and K `[row][dim]`, Vᵀ `[dim][key]`, rows padded for 8-byte
    fragment loads) and warp fragments. Every fragment value is a scalar
    variable (`s3_2`: element 2 of the scores of keys 24..31), as numba
    keeps indexed local arrays in local memory."""

    def __init__(self, body: GroupBody, p: AttentionPattern, shape: AttentionSizes,
                 tile: AttentionTile, qtiles: int, dynamic: bool = False) -> None:
        self.body, self.p, self.sh, self.t, self.qtiles = body, p, shape, tile, qtiles
        self.dynamic = dynamic
        self.batch_lines, self.bcoords = unravel("bz", shape.batch, prefix="b")
        wq, wk, wv = mma_widths(tile, shape.d)
        self.q = _Tile("q", tile.block_q, shape.d, shape.d, False, wq)
        self.k = _Tile("k", tile.block_k, shape.d, shape.d, False, wk)
        self.v = _Tile("v", tile.block_k, shape.dv, shape.dv, True, wv)
        self.v_offset = tile.block_k * wk  # Vᵀ follows K in each K/V buffer
        words = mma_shared_words(tile, shape.d, shape.dv, shape.element)
        self.kv_words = words["kv"] // tile.stages
        # f32 operands are staged as TF32 big and small parts, the small
        # ones these many words after the big ones (`tf32_split`)
        self.split = staged_parts(shape.element) == 2
        self.q_small, self.kv_small = split_offsets(tile, shape.d, shape.dv)
        self.kv_base = 0
        # Q follows the K/V buffers in one array, static or dynamic: its
        # fragments are read each key step and, in the array the staging
        # stores to, stay loads there (hoisted out of the loop they would
        # hold d / 2 registers, d * 1.5 with f32's TF32 parts, all kernel long)
        self.q_base = words["kv"]
        self.steps = -(-shape.skv // tile.block_k)
        self.frag_a = mma_helpers(shape.element)[0]
        self.row = mma_row(shape.element)
        self.n_keys = tile.block_k // MMA_K  # score fragments per warp
        self.n_out = shape.dv // MMA_K  # output fragments per warp
        self.n_dims = shape.d // MMA_K  # Q fragments per warp

    def lines(self) -> list[str]:
        w, t, sh = self, self.t, self.sh
        out = [
            "tid = cuda.threadIdx.x",
            f"lane = tid % {WARP_SIZE}",
            f"wp = tid // {WARP_SIZE}",
            "g = lane // 4",
            "t2 = (lane % 4) * 2",
            f"q0 = (cuda.blockIdx.x % {w.qtiles}) * {t.block_q}",
            f"bz = cuda.blockIdx.x // {w.qtiles}",
            *w.batch_lines,
            *(f"{b}base = {self._base(b)}" for b in ("q", "k", "v", "o")),
            *self._declare(),
            "# Q, once",
            *self._stage_loop(w.q, "Qt", str(w.q_base), "q0", sh.s),
        ]
        if t.stages == 2:
            out += ["# the first K/V tile", *self._stage_kv_loop(str(w.kv_base), "0")]
        out += [f"qf = {self.q_base} + (wp * {self.n_dims * WARP_SIZE} + lane) * 4"]
        for r in range(2):
            out += [f"qr{r} = q0 + wp * {MMA_ROWS} + g + {8 * r}",
                    f"qc{r} = min(qr{r}, {sh.s - 1})",  # side inputs of rows past S
                    f"m{r} = {NEG_INF}", f"l{r} = {ZERO}"]
        out += [f"fzero = {ZERO}", f"oacc = {_zeros(self.n_out)}"]
        out += [f"for kt in range({w.steps}):", *indent(self._key_step(), 1), *self._finish()]
        return out

    def _declare(self) -> list[str]:
        """The K/V buffers and Q in one array (dynamic past 48 KiB, as in
        the SIMT engine) and the simulator's lane exchange `X`."""
        words = sum(mma_shared_words(self.t, self.sh.d, self.sh.dv, self.sh.element).values())
        warps = self.t.block_q // MMA_ROWS
        size = 0 if self.dynamic else words
        alias = ["Qt = SM", "KV = SM"]
        sim = [f"SM = cuda.shared.array({size}, {F32})", *alias,
               f"X = cuda.shared.array(({warps}, {WARP_SIZE}, 8), {F32})"]
        gpu = [f"SM = cuda.shared.array({size}, {F32}, alignment={ALIGN})", *alias,
               f"X = cuda.shared.array((1, 1, 8), {F32})  # unused: lanes shuffle"]
        return [f"if {SIMULATED}:", *indent(sim, 1), "else:", *indent(gpu, 1)]

    def _vectorised(self, tile: _Tile) -> bool:
        """Whether `tile` stages 4 consecutive head dims per thread and step:
        its head dims are contiguous in its source."""
        return self._strides(tile.which)[1] == 1 and tile.cols % VEC == 0

    def _vector_count(self, tile: _Tile) -> int:
        return tile.rows * tile.cols // VEC

    def _vector_coords(self, tile: _Tile, first: str) -> list[str]:
        """`u`, this thread's vector of the tile (`first` + its id), and its
        row `r` and first head dim `c`. A transposed tile's consecutive
        lanes take consecutive rows: their stores into the `[dim][row]`
        tile hit distinct banks (a warp along a row put 16 lanes on one
        bank); the others' lanes run along the row."""
        per_row = tile.cols // VEC
        if tile.transposed:
            rc = [f"r = u % {_u(tile.rows)}", f"c = (u // {_u(tile.rows)}) * {_u(VEC)}"]
        else:
            rc = [f"r = u // {_u(per_row)}", f"c = (u % {_u(per_row)}) * {_u(VEC)}"]
        return [f"u = {_u('tid')} + {_u(first)}", *rc]

    def _vector_loads(self, tile: _Tile, origin: str, limit: int, names: list[str]) -> list[str]:
        """The vector at (`r`, `c`) loaded into `names` (zeros past `limit` rows)."""
        r_stride = self._strides(tile.which)[0]
        src = self.p.source(tile.which)
        assert isinstance(src, BlockArgument)
        lines = [f"gr = {_u(origin)} + r",
                 f"at = {_u(f'{tile.which}base')} + gr * {_u(r_stride)} + c"]
        valid = f" if gr < {_u(limit)} else {ZERO}" if limit % tile.rows else ""
        for i, name in enumerate(names):
            value = load_expr(self.body, src, f"at + {_u(i)}" if i else "at")
            lines.append(f"{name} = {value}{valid}")
        return lines

    def _vector_stores(self, tile: _Tile, array: str, offset: str, names: list[str]) -> list[str]:
        """The vector `names` of (`r`, `c`) stored into its tile at `offset`:
        Q in fragment order (`_q_slot`), Vᵀ a value per row of dims, K as
        one 16-byte store (and one of its small parts)."""
        base = _u(offset)
        if tile.which == "q":
            return self._q_stores(tile, array, base, names)
        if tile.transposed:
            width = _u(tile.width)
            return [line for i, name in enumerate(names)
                    for line in self._stores(array, f"{base} + (c + {_u(i)}) * {width} + r", name)]
        dest = f"{base} + r * {_u(tile.width)} + c"
        if not self.split:
            return [f"st_vec4_f32({array}, {dest}, {', '.join(names)})"]
        lines = [f"{name}h, {name}l = tf32_split({name})" for name in names]
        return [*lines, f"st_vec4_f32({array}, {dest}, {', '.join(n + 'h' for n in names)})",
                f"st_vec4_f32({array}, {dest} + {_u(self.kv_small)}, "
                f"{', '.join(n + 'l' for n in names)})"]

    def _q_stores(self, tile: _Tile, array: str, base: str, names: list[str]) -> list[str]:
        """Q's vector of head dims `c ..` of row `r` in fragment order: the
        slots of the vector's elements lie at fixed distances from the
        first's for every row and vector of the tile (checked here, on the
        slot expression itself), so the first slot is computed once, `qd`,
        and each element adds its distance; numba types one index
        expression per vector instead of one per element and part (GPT-2's
        f32 attention kernel: 188 of its 414 unsigned casts). Else each
        element gets its own slot."""
        steps = _slot_steps(self._q_slot(_u(0), "r", "c"),
                            [self._q_slot(_u(0), "r", f"c + {_u(i)}") for i in range(len(names))],
                            tile.rows, tile.cols)
        if steps is None:
            return [line for i, name in enumerate(names)
                    for line in self._stores(array, self._q_slot(base, "r", f"c + {_u(i)}"),
                                             name)]
        lines = [f"qd = {self._q_slot(base, 'r', 'c')}"]
        for step, name in zip(steps, names, strict=True):
            lines += self._stores(array, _plus("qd", step), name, unsigned=True)
        return lines

    def _q_slot(self, base: str, r: str, col: str) -> str:
        """Where Q's element (`r`, `col`) of the tile goes: in the order of a
        warp's fragments, so that a lane reads its A fragment of 8 head dims
        (rows g and g + 8, dims 2t and 2t + 1) as one 16-byte vector
        already in register order: no moves between the load and the
        product (row-major rows made ptxas copy every A fragment into place
        before each product: 252 moves per warp and key step of 1240
        instructions, f32 128 x 32, Nsight Compute)."""
        r, col = _u(r), _u(col)
        frag = f"({r} // {_u(MMA_ROWS)}) * {_u(self.n_dims)} + {col} // {_u(MMA_K)}"
        lane = f"({r} % {_u(8)}) * {_u(4)} + ({col} % {_u(MMA_K)}) // {_u(2)}"
        return (f"{base} + (({frag}) * {_u(WARP_SIZE)} + {lane}) * {_u(4)} + ({col} % {_u(2)}) * "
                f"{_u(2)} + ({r} // {_u(8)}) % {_u(2)}")

    def _dest(self, tile: _Tile, offset: str) -> str:
        if tile.which == "q":  # the element walk of a Q whose head dims are strided
            return self._q_slot(offset, "r", "c")
        return super()._dest(tile, offset)

    def _stage_loop(self, tile: _Tile, array: str, offset: str, origin: str,
                    limit: int) -> list[str]:
        """Global -> shared, 4 consecutive head dims per thread and step in
        unsigned index math (no negative-index wrap-around, shifts for the
        powers of two): a tile whose head dims are contiguous in its source;
        any other, the SIMT engine's element walk."""
        if not self._vectorised(tile):
            return super()._stage_loop(tile, array, offset, origin, limit)
        count, threads = self._vector_count(tile), self.t.threads
        names = [f"v{i}" for i in range(VEC)]
        lines = [*self._vector_loads(tile, origin, limit, names),
                 *self._vector_stores(tile, array, offset, names)]
        if count % threads:  # the last step's spare threads neither load nor store
            lines = [f"if u < {_u(count)}:", *indent(lines, 1)]
        return _own_names([f"for e in range({-(-count // threads)}):",
                           *indent([*self._vector_coords(tile, f"e * {threads}"), *lines], 1)],
                          f"_{tile.which}")

    def _prefetch(self) -> tuple[list[str], list[str]]:
        """(loads of the next K/V tile into registers, their stores into the
        other buffer), as `_stage_loop` stages them, unrolled."""
        if not (self._vectorised(self.k) and self._vectorised(self.v)):
            return super()._prefetch()
        loads: list[str] = []
        stores: list[str] = []
        threads = self.t.threads
        for tile, offset in ((self.k, "nb"), (self.v, f"nb + {self.v_offset}")):
            count = self._vector_count(tile)
            for e in range(-(-count // threads)):
                names = [f"p{tile.which}{e}_{i}" for i in range(VEC)]
                coords = self._vector_coords(tile, str(e * threads))
                load = self._vector_loads(tile, "k1", self.sh.skv, names)
                store = self._vector_stores(tile, "KV", offset, names)
                if count % threads and (e + 1) * threads > count:
                    guard = f"if u < {_u(count)}:"
                    load = [*(f"{n} = {ZERO}" for n in names), guard, *indent(load, 1)]
                    store = [guard, *indent(store, 1)]
                loads += _own_names([*coords, *load], f"_{tile.which}{e}")
                stores += _own_names([*coords, *store], f"_{tile.which}{e}")
        return loads, stores

    def _stores(self, array: str, dest: str, value: str, unsigned: bool = False) -> list[str]:
        """A staged value, or for f32 its TF32 big and small parts (`dest`
        is unsigned when it says so or `unsigned`: the small part's offset
        must be too, as numba widens uint64 + int64 to a float)."""
        if not self.split:
            return super()._stores(array, dest, value)
        small = self.q_small if array == "Qt" else self.kv_small
        plus = f"{_u(small)}" if unsigned or "numba.uint64" in dest else str(small)
        # a named value's parts are named after it: one name, one assignment
        big, part = (f"{value}h", f"{value}l") if value.isidentifier() else ("tfh", "tfl")
        return [f"{big}, {part} = tf32_split({value})", f"{array}[{dest}] = {big}",
                f"{array}[{dest} + {plus}] = {part}"]

    def _q_fragments(self, kk: int) -> list[str]:
        """`qa<kk>`: this lane's Q fragment of dims `8 kk + t2 (+1)`, rows g
        and g + 8 of its warp: one vector in fragment order (`_q_slot`),
        and one of its small parts for f32."""
        name, at = f"qa{kk}", f"qf + {kk * WARP_SIZE * 4}"
        lines = [f"{name}_0, {name}_2, {name}_1, {name}_3 = ld_vec4_f32(Qt, {at})"]
        if not self.split:
            return [*lines, self._frag_a(name)]
        lines.append(f"qs{kk}_0, qs{kk}_2, qs{kk}_1, qs{kk}_3 = "
                     f"ld_vec4_f32(Qt, {at} + {self.q_small})")
        args = ", ".join([*(f"{name}_{e}" for e in range(4)), *(f"qs{kk}_{e}" for e in range(4))])
        return [*lines, f"{name} = mma_a_f32s({args})"]

    def _row(self, acc: str, a: str, at: str, step: int, into: str = "") -> str:
        """`acc` (a tuple of accumulator fragments) plus the products of the A
        fragment `a` with the B fragments at `at`, `at + step`, ... of the
        K/V buffer: one `mma_row_<e>` call (`codegen/mma.py`)."""
        return (f"{into or acc} = {self.row}(X, wp, lane, {a}, KV, {at}, {step}, "
                f"{self.kv_small}, {acc})")

    def _frag_a(self, name: str) -> str:
        return f"{name} = {self.frag_a}({', '.join(f'{name}_{e}' for e in range(4))})"

    def _qk(self) -> list[str]:
        """`s<j>_<e>`: the scores of keys `8 j ..`, a product per 8 head dims,
        after the score ops' work that needs no score (`_early_scores`: a
        mask's loads), in flight during the products; `_scores`, next in the
        key step, has the rest. (At the top of the step, beside the staging's
        loads, the f32 128 x 32 tile took 130 registers, past the 128 of two
        blocks per SM.)"""
        early, self._late = _early_scores(self._score_lines())
        # each product's sum a name of its own: numba's SSA reconstruction
        # takes a pass over the whole kernel per name assigned twice
        lines = [*early, f"kf = cbi + g * {self.k.width} + t2", f"sacc0 = {_zeros(self.n_keys)}"]
        for kk in range(self.n_dims):
            lines += [*self._q_fragments(kk),
                      self._row(f"sacc{kk}", f"qa{kk}", f"kf + {kk * MMA_K}",
                                MMA_K * self.k.width, into=f"sacc{kk + 1}")]
        return [*lines, f"{_elements('s', self.n_keys)} = sacc{self.n_dims}"]

    def _scores(self) -> list[str]:
        """The score ops' lines `_qk` left (those that need a score)."""
        return self._late

    def _score_lines(self) -> list[str]:
        """`x<j>_<e>`: the score ops applied at each element's (query, key);
        keys past the end score -inf."""
        sh = self.sh
        ragged = sh.skv % self.t.block_k != 0
        lines: list[str] = []
        for j in range(self.n_keys):
            for c in range(2):
                lines.append(f"kc{j}_{c} = k0 + {j * MMA_K + c} + t2")
                if ragged:
                    lines.append(f"kk{j}_{c} = min(kc{j}_{c}, {sh.skv - 1})")
            for e in range(4):
                key = f"kk{j}_{e % 2}" if ragged else f"kc{j}_{e % 2}"
                live = f"kc{j}_{e % 2} < {sh.skv}" if ragged else None
                lines += self._score(f"x{j}_{e}", f"s{j}_{e}", f"qc{e // 2}", key, live,
                                     f"_{j}_{e}")
        return lines

    def _online_softmax(self) -> list[str]:
        lines: list[str] = []
        for r in range(2):
            row = [f"x{j}_{2 * r + c}" for j in range(self.n_keys) for c in range(2)]
            lines.append(f"t{r}_0 = {_fold('max', row)}")
        lines += self._across_quad("max", "t")
        for r in range(2):
            lines += [
                f"n{r} = max(m{r}, t{r}_{QUAD_STEPS})",
                f"mb{r} = select(n{r} > {NEG_INF}, n{r}, {ZERO})  # rows masked so far: no NaN",
                f"a{r} = fast_exp(m{r} - mb{r})",
                f"m{r} = n{r}",
            ]
        # the probabilities `p<j>_<e>`, not the scores' names again (see `_qk`)
        lines += [f"p{j}_{e} = fast_exp(x{j}_{e} - mb{e // 2})"
                  for j in range(self.n_keys) for e in range(4)]
        for r in range(2):
            terms = " + ".join(f"p{j}_{2 * r + c}" for j in range(self.n_keys) for c in range(2))
            lines.append(f"l{r} = l{r} * a{r} + ({terms})")
        scaled = _concat([[f"o{n}_{e} * a{e // 2}" for e in range(4)] for n in range(self.n_out)])
        return [*lines, f"{_elements('o', self.n_out)} = oacc", f"oacc = {scaled}"]

    def _pv(self) -> list[str]:
        """The accumulators += P @ V: the probabilities of keys `8 j ..` are
        the A fragment of the product over those keys."""
        lines = [f"vf = cbi + {self.v_offset} + g * {self.v.width} + t2"]
        for j in range(self.n_keys):
            lines += [self._frag_a(f"p{j}"),
                      self._row("oacc", f"p{j}", f"vf + {j * MMA_K}", MMA_K * self.v.width)]
        return lines

    def _across_quad(self, how: str, name: str) -> list[str]:
        """`<name>0_0`, `<name>1_0` of the 4 lanes of a row combined (max or
        sum) into `<name>0_2`, `<name>1_2` (`QUAD_STEPS`), a name per step."""
        lines = []
        for step in range(1, QUAD_STEPS + 1):
            for r in range(2):
                last, new = f"{name}{r}_{step - 1}", f"{name}{r}_{step}"
                other = f"xor_lanes(X, wp, lane, {last}, {1 << (step - 1)})"
                lines.append(f"{new} = max({last}, {other})" if how == "max"
                             else f"{new} = {last} + {other}")
        return lines

    def _finish(self) -> list[str]:
        """Row sums across the quad, then each output divided once, rounded
        to its stored type and stored."""
        w, sh = self, self.sh
        view = self._view("o")
        rs, ds = view.strides[-2], view.strides[-1]
        # names of their own, apart from the key step's `o<n>_<e>` (see `_own_names`)
        lines = [f"{_elements('fo', self.n_out)} = oacc",
                 "# each lane summed its own keys: combine them", "ls0_0 = l0", "ls1_0 = l1",
                 *self._across_quad("sum", "ls")]
        for r in range(2):
            stores = [f"inv{r} = {float_literal(1.0)} / ls{r}_{QUAD_STEPS}"]
            for n in range(self.n_out):
                for c in range(2):
                    value = store_expr(w.p.output, f"fo{n}_{2 * r + c} * inv{r}")
                    col = f"({n * MMA_K + c} + t2)"
                    stores.append(f"out0[obase + qr{r} * {rs} + {col} * {ds}] = {value}")
            lines += [f"if qr{r} < {sh.s}:", *indent(stores, 1)] if sh.s % self.t.block_q \
                else stores
        return lines


def _own_names(lines: list[str], suffix: str) -> list[str]:
    """`lines` with the staging temporaries (`STAGING_NAMES`, and the TF32
    parts `v<i>h`, `v<i>l`) suffixed: each staging loop and unrolled
    prefetch step assigns names no other one does. numba's SSA
    reconstruction walks the whole kernel once per name assigned in two
    places, and the Q, K and V loops shared theirs."""
    names = "|".join(STAGING_NAMES)
    pattern = re.compile(rf"\b({names}|v\d[hl])\b")
    return [pattern.sub(lambda m: m.group(1) + suffix, line) for line in lines]


def _concat(fragments: list[list[str]]) -> str:
    """A flat tuple of the fragments' values, written as a sum of one tuple
    per fragment: Python builds a literal of more than 30 values as a list,
    whose conversion numba's bytecode front end rejects."""
    return " + ".join(f"({', '.join(values)})" for values in fragments)


def _zeros(fragments: int) -> str:
    """A tuple of `fragments` zero accumulator fragments (4 values each)."""
    return _concat([["fzero"] * 4] * fragments)


def _elements(name: str, fragments: int) -> str:
    """`<name>0_0, <name>0_1, ...`: the values of `fragments` fragments."""
    return ", ".join(f"{name}{n}_{e}" for n in range(fragments) for e in range(4))


_ASSIGNMENT = re.compile(r"(\w+) = (.*)")
_NAME = re.compile(r"[A-Za-z_]\w*")


def _early_scores(lines: list[str]) -> tuple[list[str], list[str]]:
    """`lines` (the score ops of a key step) split into those that need no
    raw score `s<j>_<e>` (the keys' columns, the loads of a mask or a bias
    and what is computed from them alone) and the rest, in order. The first
    go before the products, so that their loads are in flight during them
    rather than exposed after them; lines that are not plain assignments
    keep everything in place."""
    parsed = [_ASSIGNMENT.fullmatch(line) for line in lines]
    if not all(parsed):
        return [], lines
    late: set[str] = set()
    early_lines: list[str] = []
    late_lines: list[str] = []
    for line, m in zip(lines, parsed, strict=True):
        assert m is not None
        used = set(_NAME.findall(m.group(2)))
        if any(n in late or _RAW_SCORE.fullmatch(n) for n in used):
            late.add(m.group(1))
            late_lines.append(line)
        else:
            early_lines.append(line)
    return early_lines, late_lines


_RAW_SCORE = re.compile(r"s\d+_\d")


class _Unsigned:
    """`numba` in an index expression evaluated with Python's integers."""

    uint64 = int


def _slot_steps(first: str, slots: list[str], rows: int, cols: int) -> list[int] | None:
    """The distances of `slots` from `first` (index expressions in `r` and
    `c`), when they are the same for every row `r` of the tile and every
    vector start `c` (multiples of the vector's length below `cols`); None
    when one varies."""
    scope = {"numba": _Unsigned}
    base, *others = (compile(s, "<slot>", "eval") for s in (first, *slots))
    steps: list[int] | None = None
    for r in range(rows):
        for c in range(0, cols, len(slots)):
            at = {"r": r, "c": c}
            zero = eval(base, scope, at)
            here = [eval(s, scope, at) - zero for s in others]
            if steps is not None and here != steps:
                return None
            steps = here
    return steps
