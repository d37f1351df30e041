"""Split-KV ("flash-decoding") attention: a `#fusion.attention` schedule
with `splits = N > 1`, for few queries over many keys (a decode step has
one query per batch entry and head: one block per head walking every key
leaves most SMs idle).

One launch plus one, both of the group (the plan, its launch count and the
cost model see the two):

1. `<name>_partials`, grid (batch x heads) x query tiles x N: block `sp`
   walks the K/V tiles of its chunk, keys `[sp * C, (sp + 1) * C)` (C a
   whole number of `block_k` tiles, `attention_schedule.SplitPlan`), with
   the kernel of `codegen/attention.py`, and writes, per query row, its
   row max `m`, row sum `l` (both relative to its `m`) and unnormalised
   outputs `o` to two workspaces, `pml[sp, row, 2]` and `po[sp, row, dv]`
   (f32; rows are batch x heads x queries);
2. `<name>`, one thread per output element: `M = max_i m_i`, then
   `O = sum_i exp(m_i - M) o_i / sum_i exp(m_i - M) l_i`, rounded once to
   the output's stored type and stored through its view.

A chunk whose keys are all masked for a row leaves `m = -inf, l = 0, o =
0`: its weight `exp(-inf)` is 0 (the combine subtracts 0 when every `m` is
-inf, so no `-inf - -inf`); a row masked everywhere is 0 / 0, as in the
one-kernel schedule. The workspaces are overwritten before they are read.
"""

from __future__ import annotations

import dataclasses

from fusec.analysis.attention_pattern import AttentionPattern
from fusec.analysis.group_body import GroupBody
from fusec.analysis.targets import Target
from fusec.codegen.attention import (
    F32,
    NEG_INF,
    ZERO,
    _Writer,
)
from fusec.codegen.kernel_source import (
    KernelParam,
    KernelSource,
    Workspace,
    float_literal,
    kernel_header,
    launch_text,
)
from fusec.codegen.point_evaluator import body_params, indent, store_expr
from fusec.dialects.fusion import GroupOp
from fusec.dialects.shapes import numel
from fusec.scheduling.attention_group import AttentionSizes
from fusec.scheduling.attention_schedule import AttentionTile, SplitPlan, shared_bytes

COMBINE_THREADS = 128  # threads per block of the combine kernel: one per output element
PARTIALS = ("pml", "po")  # the workspaces' parameter names: (m, l) pairs, outputs


def workspaces(shape: AttentionSizes, plan: SplitPlan) -> list[Workspace]:
    """`pml[split, row, 2]` (row max and row sum) and `po[split, row, dv]`."""
    rows = partial_rows(shape)
    return [Workspace((plan.splits, rows, 2), "float32"),
            Workspace((plan.splits, rows, shape.dv), "float32")]


def partial_rows(shape: AttentionSizes) -> int:
    """Rows of the partials: one per (batch entry, query)."""
    return max(1, numel(shape.batch)) * shape.s


def emit_split(flat: GroupOp, body: GroupBody, pattern: AttentionPattern,
               shape: AttentionSizes, tile: AttentionTile, name: str,
               notes: list[str], target: Target) -> KernelSource:
    """The combine kernel, with the partials kernel in its `before` (its
    tiles dynamic past `target`'s static shared-memory limit)."""
    plan = tile.split_plan(shape.skv)
    qtiles = -(-shape.s // tile.block_q)
    smem = shared_bytes(tile, shape.d, shape.dv, shape.element)
    dynamic = smem > target.static_shared_limit
    spaces = workspaces(shape, plan)
    held = [KernelParam("workspace", k, (numel(w.shape),)) for k, w in enumerate(spaces)]
    notes = [*notes, f"split-KV: {plan.splits} chunks of {plan.chunk_keys} keys "
             f"({plan.chunk_tiles} tiles), one launch writes each chunk's row max, row sum "
             "and unnormalised outputs (workspaces), a second combines them"]
    writer = SplitWriter(body, pattern, shape, tile, qtiles, dynamic, plan)
    first = f"{name}_partials"  # never a NameTable name: no op is named `*_partials`
    grid = (max(1, numel(shape.batch)) * qtiles * plan.splits, 1, 1)
    per_thread = (f"{tile.rows}x{tile.cols} scores and {tile.rows}x{tile.dims(shape.dv)} "
                  f"outputs per thread, {plan.chunk_keys} keys per block")
    head = kernel_header(flat, body.ops, launch_text(grid, (tile.threads, 1, 1), per_thread),
                         notes)
    params = ", ".join([*(f"in{k}" for k in range(len(body.args))), *PARTIALS])
    text = "\n".join([*head, "@cuda.jit", f"def {first}({params}):",
                      *indent(writer.lines(), 1)])
    partials = KernelSource(first, text, grid, (tile.threads, 1, 1),
                            [p for p in body_params(body) if p.role == "input"] + held,
                            shared_bytes=smem if dynamic else 0, notes=notes,
                            workspaces=spaces)
    return combine_kernel(flat, body, writer, name, notes, held, partials)


def combine_kernel(flat: GroupOp, body: GroupBody, writer: SplitWriter, name: str,
                   notes: list[str], held: list[KernelParam],
                   partials: KernelSource) -> KernelSource:
    """The combine kernel `name` of the `partials` kernel (its `before`),
    which reads the `held` workspaces and writes the group's output."""
    elements = partial_rows(writer.sh) * writer.sh.dv
    cgrid = (-(-elements // COMBINE_THREADS), 1, 1)
    chead = kernel_header(flat, body.ops, launch_text(
        cgrid, (COMBINE_THREADS, 1, 1), f"one output of {writer.plan.splits} partials per thread"),
        notes)
    out = [p for p in body_params(body) if p.role == "output"]
    ctext = "\n".join([*chead, "@cuda.jit", f"def {name}(out0, {', '.join(PARTIALS)}):",
                       *indent(writer.combine_lines(elements), 1)])
    read = [dataclasses.replace(p, read_only=True) for p in held]  # the combine only reads them
    return KernelSource(name, ctext, cgrid, (COMBINE_THREADS, 1, 1), out + read, notes=notes,
                        workspaces=partials.workspaces, before=[partials])


class SplitWriter(_Writer):
    """The partials kernel (the one-kernel body over a chunk of the keys,
    ending in stores to the workspaces) and the combine kernel's body."""

    def __init__(self, body: GroupBody, p: AttentionPattern, shape: AttentionSizes,
                 tile: AttentionTile, qtiles: int, dynamic: bool, plan: SplitPlan) -> None:
        super().__init__(body, p, shape, tile, qtiles, dynamic)
        self.plan = plan
        self.steps = "nsteps"
        self.key_start = "ks + "
        self.first_key = "ks"

    def _block_lines(self) -> list[str]:
        n, plan = self.plan.splits, self.plan
        return [f"sp = cuda.blockIdx.x % {n}  # this block's chunk of the keys",
                f"ks = sp * {plan.chunk_keys}",
                f"nsteps = min({plan.chunk_tiles}, {plan.steps} - sp * {plan.chunk_tiles})",
                f"q0 = (cuda.blockIdx.x // {n} % {self.qtiles}) * {self.t.block_q}",
                f"bz = cuda.blockIdx.x // {n * self.qtiles}"]

    def _finish(self) -> list[str]:
        """Row sums across the lanes; each row's max and sum (lane 0) and
        its unnormalised outputs (every lane its dims) to the workspaces."""
        t, sh = self.t, self.sh
        pml, po = PARTIALS
        lines = ["# each lane summed its own keys: combine them",
                 *(f"t{i} = l{i}" for i in range(t.rows)), *self._across_lanes("sum"),
                 f"oc = tx * {self.dims}"]
        ragged = self.dims * t.lanes != sh.dv
        for i in range(t.rows):
            stores = [f"pr = sp * {partial_rows(sh)} + bz * {sh.s} + qr{i}  # (split, row)",
                      "if tx == 0:", f"    {pml}[pr * 2] = m{i}", f"    {pml}[pr * 2 + 1] = t{i}"]
            for d in range(self.dims):
                store = f"{po}[pr * {sh.dv} + oc + {d}] = o{i}_{d}"
                stores += [f"if oc + {d} < {sh.dv}:", f"    {store}"] if ragged else [store]
            lines += [f"if qr{i} < {sh.s}:", *indent(stores, 1)] if sh.s % t.block_q else stores
        return lines

    def combine_lines(self, elements: int) -> list[str]:
        """Thread `i` combines output element `i` (row `i // dv`, dim `i % dv`)."""
        sh, n = self.sh, self.plan.splits
        pml, po = PARTIALS
        rows = partial_rows(sh)
        view = self._view("o")
        rs, ds = view.strides[-2], view.strides[-1]
        value = store_expr(self.p.output, "acc * inv")
        at = f"(s * {rows} + row) * 2"
        body = [f"oc = i % {sh.dv}", f"row = i // {sh.dv}", f"qr = row % {sh.s}",
                f"bz = row // {sh.s}", *self.batch_lines, f"obase = {self._base('o')}",
                f"mx = {NEG_INF}",
                f"for s in range({n}):", f"    mx = max(mx, {pml}[{at}])",
                f"mb = select(mx > {NEG_INF}, mx, {ZERO})  # every chunk masked: no -inf - -inf",
                f"den = {ZERO}", f"acc = {ZERO}",
                f"for s in range({n}):",
                f"    w = {F32}(fast_exp({pml}[{at}] - mb))",
                f"    den += w * {pml}[{at} + 1]",
                f"    acc += w * {po}[(s * {rows} + row) * {sh.dv} + oc]",
                f"inv = {float_literal(1.0)} / den",
                f"out0[obase + qr * {rs} + oc * {ds}] = {value}"]
        return [f"i = cuda.blockIdx.x * {COMBINE_THREADS} + cuda.threadIdx.x",
                f"if i < {elements}:", *indent(body, 1)]
