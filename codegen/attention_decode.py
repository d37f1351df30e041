"""Decode attention (`engine = "decode"` in `#fusion.attention`): a few
queries (S <= 4) per (batch, head) over many keys, streamed from memory
once, without staging K/V in shared memory.

Grid (batch x heads) x query tiles x splits; a block of W warps
(`attention_decode_schedule.py` for the tile's fields). Warp `w` walks the
keys `ks + it * W * U + u * W + w` of its block's chunk (`U` keys, `u < U`,
per iteration: their K and V rows are all loaded before any is used, so
that `2U` row loads are in flight); lane `l` owns head dims `[l * D/32,
(l + 1) * D/32)` (contiguous: a warp reads whole rows, coalesced). Q is held
in registers (D/32 values per lane and query). Per key: each lane's partial
dot product, summed over the warp by butterfly exchanges (`xor_lanes`:
`shfl.sync.bfly` on the GPU, a shared exchange with barriers in the
simulator, so every warp makes the same calls), the score ops at (query,
key), then the warp's online softmax (m and l the same in every lane) and
`o = o * a + p * v` on the lane's dims.

At the end the warps' (m, l, o) meet in shared memory and the block's
threads combine them, one output element each: with one split the output
is divided once and rounded once to its stored type; with more, the block
writes its chunk's partials in `codegen/attention_split.py`'s layout and
that module's combine kernel finishes.
"""

from __future__ import annotations

from xdsl.ir import BlockArgument

from fusec.analysis.attention_pattern import AttentionPattern
from fusec.analysis.group_body import GroupBody
from fusec.analysis.targets import WARP_SIZE
from fusec.codegen.attention import (
    F32,
    NEG_INF,
    ZERO,
    _Writer,
)
from fusec.codegen.attention_split import (
    PARTIALS,
    SplitWriter,
    combine_kernel,
    partial_rows,
    workspaces,
)
from fusec.codegen.kernel_source import (
    KernelParam,
    KernelSource,
    float_literal,
    kernel_header,
    launch_text,
)
from fusec.codegen.point_evaluator import body_params, indent, load_expr, store_expr
from fusec.codegen.reduction_tree import SIMULATED
from fusec.dialects.fusion import GroupOp
from fusec.dialects.shapes import numel
from fusec.scheduling.attention_group import AttentionSizes
from fusec.scheduling.attention_schedule import AttentionTile, SplitPlan


def emit_decode(flat: GroupOp, body: GroupBody, pattern: AttentionPattern,
                shape: AttentionSizes, tile: AttentionTile, name: str,
                notes: list[str]) -> KernelSource:
    """The decode kernel, or (splits > 1) the combine kernel with the
    decode partials kernel in its `before`."""
    plan = tile.split_plan(shape.skv)
    qtiles = -(-shape.s // tile.block_q)
    writer = DecodeWriter(body, pattern, shape, tile, qtiles, plan)
    grid = (max(1, numel(shape.batch)) * qtiles * plan.splits, 1, 1)
    block = (tile.threads, 1, 1)
    per_thread = (f"{tile.rows}x{shape.d // WARP_SIZE} Q and {tile.rows}x{shape.dv // WARP_SIZE} "
                  f"outputs per lane, {plan.chunk_keys} keys per block")
    if plan.splits == 1:
        head = kernel_header(flat, body.ops, launch_text(grid, block, per_thread), notes)
        text = "\n".join([*head, "@cuda.jit", f"def {name}({body.signature()}):",
                          *indent(writer.lines(), 1)])
        return KernelSource(name, text, grid, block, body_params(body), notes=notes)
    spaces = workspaces(shape, plan)
    held = [KernelParam("workspace", k, (numel(w.shape),)) for k, w in enumerate(spaces)]
    notes = [*notes, f"split-KV: {plan.splits} chunks of {plan.chunk_keys} keys, one launch "
             "writes each chunk's row max, row sum and unnormalised outputs (workspaces), "
             "a second combines them"]
    first = f"{name}_partials"  # never a NameTable name: no op is named `*_partials`
    head = kernel_header(flat, body.ops, launch_text(grid, block, per_thread), notes)
    params = ", ".join([*(f"in{k}" for k in range(len(body.args))), *PARTIALS])
    text = "\n".join([*head, "@cuda.jit", f"def {first}({params}):",
                      *indent(writer.lines(), 1)])
    partials = KernelSource(first, text, grid, block,
                            [p for p in body_params(body) if p.role == "input"] + held,
                            notes=notes, workspaces=spaces)
    combiner = SplitWriter(body, pattern, shape, tile, qtiles, False, plan)
    return combine_kernel(flat, body, combiner, name, notes, held, partials)


class DecodeWriter(_Writer):
    """The decode kernel's body (see the module docstring); every per-lane
    value is a scalar variable (`qf1_2`: query 1, the lane's head dim 2)."""

    def __init__(self, body: GroupBody, p: AttentionPattern, shape: AttentionSizes,
                 tile: AttentionTile, qtiles: int, plan: SplitPlan) -> None:
        super().__init__(body, p, shape, tile, qtiles)
        self.plan = plan
        self.warps = tile.lanes
        self.dl, self.dvl = shape.d // WARP_SIZE, shape.dv // WARP_SIZE

    def lines(self) -> list[str]:
        t, plan = self.t, self.plan
        n = plan.splits
        out = ["tid = cuda.threadIdx.x", f"lane = tid % {WARP_SIZE}", f"w = tid // {WARP_SIZE}",
               f"sp = cuda.blockIdx.x % {n}  # this block's chunk of the keys",
               f"ks = sp * {plan.chunk_keys}",
               f"nsteps = min({plan.chunk_tiles}, {plan.steps} - sp * {plan.chunk_tiles})",
               f"q0 = (cuda.blockIdx.x // {n} % {self.qtiles}) * {t.block_q}",
               f"bz = cuda.blockIdx.x // {n * self.qtiles}", *self.batch_lines,
               *(f"{b}base = {self._base(b)}" for b in ("q", "k", "v", "o")),
               *self._declare(),
               f"dq = lane * {self.dl}  # this lane's head dims of Q and K",
               f"dw = lane * {self.dvl}  # of V and the output"]
        out += self._load_q()
        for i in range(t.rows):
            out += [f"m{i} = {NEG_INF}", f"l{i} = {ZERO}",
                    *(f"o{i}_{d} = {ZERO}" for d in range(self.dvl))]
        out += ["for it in range(nsteps):", *indent(self._key_step(), 1), *self._finish()]
        return out

    def _declare(self) -> list[str]:
        """The warps' (m, l, o) for the final combine; the simulator's lane
        exchange `X` (`xor_lanes`; on the GPU the lanes shuffle)."""
        w, bq, dv = self.warps, self.t.block_q, self.sh.dv
        arrays = [f"Ms = cuda.shared.array(({w}, {bq}), {F32})",
                  f"Ls = cuda.shared.array(({w}, {bq}), {F32})",
                  f"Os = cuda.shared.array(({w}, {bq}, {dv}), {F32})"]
        return [*arrays, f"if {SIMULATED}:",
                f"    X = cuda.shared.array(({w}, {WARP_SIZE}, 8), {F32})", "else:",
                f"    X = cuda.shared.array((1, 1, 8), {F32})  # unused: lanes shuffle"]

    def _load(self, which: str, row: str, dim: str) -> str:
        """Element (`row`, head dim `dim`) of Q, K or V, in f32."""
        src = self.p.source(which)
        assert isinstance(src, BlockArgument)
        rs, ds = self._strides(which)
        return f"{F32}({load_expr(self.body, src, f'{which}base + {row} * {rs} + {dim} * {ds}')})"

    def _load_q(self) -> list[str]:
        lines: list[str] = []
        for i in range(self.t.rows):
            lines += [f"qr{i} = q0 + {i}",
                      f"qc{i} = min(qr{i}, {self.sh.s - 1})  # rows past S: clamped, not stored"]
            lines += [f"qf{i}_{d} = {self._load('q', f'qc{i}', f'(dq + {d})')}"
                      for d in range(self.dl)]
        return lines

    def _key_step(self) -> list[str]:
        t, sh, u_keys = self.t, self.sh, range(self.t.cols)
        ragged = sh.skv % t.block_k != 0
        lines = [f"kb = ks + it * {t.block_k} + w"]
        for u in u_keys:
            lines.append(f"k{u} = kb + {u * self.warps}")
            lines.append(f"kc{u} = min(k{u}, {sh.skv - 1})" if ragged else f"kc{u} = k{u}")
        # every row's loads first: they are in flight together
        lines += [f"kf{u}_{d} = {self._load('k', f'kc{u}', f'(dq + {d})')}"
                  for u in u_keys for d in range(self.dl)]
        lines += [f"vf{u}_{d} = {self._load('v', f'kc{u}', f'(dw + {d})')}"
                  for u in u_keys for d in range(self.dvl)]
        for i in range(t.rows):
            for u in u_keys:
                acc = f"qf{i}_0 * kf{u}_0"
                for d in range(1, self.dl):
                    acc = f"cuda.fma(qf{i}_{d}, kf{u}_{d}, {acc})"
                lines.append(f"s{i}_{u} = {acc}")
        step = WARP_SIZE // 2
        while step >= 1:  # the warp's sum of the lanes' partial products
            lines += [f"s{i}_{u} += xor_lanes(X, w, lane, s{i}_{u}, {step})"
                      for i in range(t.rows) for u in u_keys]
            step //= 2
        return [*lines, *self._scores_at(ragged), *self._softmax_step()]

    def _scores_at(self, ragged: bool) -> list[str]:
        """`x<i>_<u>`: the score ops at (query i, key u); keys past the end -inf."""
        lines: list[str] = []
        for i in range(self.t.rows):
            for u in range(self.t.cols):
                live = f"k{u} < {self.sh.skv}" if ragged else None
                lines += self._score(f"x{i}_{u}", f"s{i}_{u}", f"qc{i}", f"kc{u}", live,
                                     f"_{i}_{u}")
        return lines

    def _softmax_step(self) -> list[str]:
        """The warp's online softmax over this step's keys and `o += p v`."""
        lines: list[str] = []
        keys = range(self.t.cols)
        for i in range(self.t.rows):
            top = f"x{i}_0"
            for u in range(1, self.t.cols):
                top = f"max({top}, x{i}_{u})"
            lines += [f"n{i} = max(m{i}, {top})",
                      f"mb{i} = select(n{i} > {NEG_INF}, n{i}, {ZERO})  # masked so far: no NaN",
                      f"a{i} = fast_exp(m{i} - mb{i})", f"m{i} = n{i}",
                      *(f"p{i}_{u} = fast_exp(x{i}_{u} - mb{i})" for u in keys),
                      f"l{i} = l{i} * a{i} + " + " + ".join(f"p{i}_{u}" for u in keys)]
            for d in range(self.dvl):
                acc = f"o{i}_{d} * a{i}"
                for u in keys:
                    acc = f"cuda.fma(p{i}_{u}, vf{u}_{d}, {acc})"
                lines.append(f"o{i}_{d} = {acc}")
        return lines

    def _finish(self) -> list[str]:
        """The warps' (m, l, o) through shared memory; thread `tid` combines
        output elements `tid + e * threads` (query `idx // dv`, dim `idx % dv`)."""
        t, sh = self.t, self.sh
        lines: list[str] = []
        for i in range(t.rows):
            lines += ["if lane == 0:", f"    Ms[w, {i}] = m{i}", f"    Ls[w, {i}] = l{i}",
                      *(f"Os[w, {i}, dw + {d}] = o{i}_{d}" for d in range(self.dvl))]
        lines.append("cuda.syncthreads()")
        count = t.block_q * sh.dv
        body = [f"i = idx // {sh.dv}", f"c = idx % {sh.dv}", "qr = q0 + i",
                f"mx = {NEG_INF}", *(f"mx = max(mx, Ms[{w}, i])" for w in range(self.warps)),
                f"mb = select(mx > {NEG_INF}, mx, {ZERO})  # every warp masked: no -inf - -inf",
                f"den = {ZERO}", f"acc = {ZERO}"]
        for w in range(self.warps):
            body += [f"wt = fast_exp(Ms[{w}, i] - mb)", f"den += wt * Ls[{w}, i]",
                     f"acc = cuda.fma(wt, Os[{w}, i, c], acc)"]
        store = self._store_lines()
        body += [f"if qr < {sh.s}:", *indent(store, 1)] if sh.s % t.block_q else store
        per = [f"idx = tid + e * {t.threads}"]
        per += [f"if idx < {count}:", *indent(body, 1)] if count % t.threads else body
        return [*lines, f"for e in range({-(-count // t.threads)}):", *indent(per, 1)]

    def _store_lines(self) -> list[str]:
        """The combined element: the output (one split) or the partials."""
        sh = self.sh
        if self.plan.splits == 1:
            view = self._view("o")
            rs, ds = view.strides[-2], view.strides[-1]
            value = store_expr(self.p.output, f"acc * ({float_literal(1.0)} / den)")
            return [f"out0[obase + qr * {rs} + c * {ds}] = {value}"]
        pml, po = PARTIALS
        return [f"pr = sp * {partial_rows(sh)} + bz * {sh.s} + qr  # (split, row)",
                "if c == 0:", f"    {pml}[pr * 2] = mx", f"    {pml}[pr * 2 + 1] = den",
                f"{po}[pr * {sh.dv} + c] = acc"]
