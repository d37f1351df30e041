"""Kernels for `kind = "reduction"` groups: one reduction over any axes, or
reductions fused with their elementwise prologue and epilogue (decomposed
softmax, layer_norm, `sum(gelu(x))`) as ONE kernel.

Schedule. The group's rows (points of the kept axes, `reduction_plan`) are
spread over thread blocks of `LANES x ROWS` threads: `LANES` threads share a
row and stride over its elements, `ROWS` rows live in one block.
- *row schedule* (the last axis is reduced, so a row's elements are
  contiguous): `threadIdx.x` is the lane, `threadIdx.y` the row, so a warp
  reads consecutive addresses;
- *column schedule* (the last axis is kept): `threadIdx.x` is the row, so a
  warp reads consecutive rows at one reduction index; lanes are `threadIdx.y`.
  The lanes' partial results (and the row cache) are stored transposed in
  shared memory, `red[lane, row]`, so the 32 rows of a warp hit 32 different
  banks when the tree combines them (`red[row, lane]` would put a warp's
  accesses `lanes` words apart: an 8-way bank conflict for 8 lanes).
Each reduction stage is one pass over the row: every lane accumulates its
elements in a register, then the block combines the lanes with a tree through
shared memory (log2(LANES) steps, one barrier each; the tree runs in the CUDA
simulator, where warp shuffles do not). A final pass writes the row-shaped
outputs; per-row outputs are stored by lane 0.

Split rows. When the rows alone cannot fill the GPU (a column sum over 64
channels of a million rows is 2 blocks), each row is also split over
`splits` blocks (`blockIdx.y`), each reducing one contiguous chunk. A block
writes its partial result per row to a workspace, and the last block of a
row group to arrive (an arrival counter per group of rows, `cuda.atomic.add`
after `cuda.threadfence()`) combines the partials, resets the counter to
zero for the next launch, and runs the epilogue: one kernel, no second
launch. Only groups with one reduction pass and no row-shaped output are
split (a second pass would need every block's result first). The last block
reads the partials with atomic adds of zero: they come from L2, never from a
stale L1 line that another row group's last block loaded earlier.

Split passes. A group with ONE pass of statistics before its final pass
over the row (a softmax or log-softmax whose max and sum share pass 1
(`online`), `x / sum(x)`, `x - mean(x)`) splits the same way in TWO
kernels: `<name>_partials` reduces each block's chunk to its partial
statistics in the workspace (`(splits, rows)` per reduction), and `<name>`
(launched next, same grid) combines every split's partials of its rows,
then writes the outputs of its own chunk, re-reading it: the input is read
twice, and no block waits for another (the launch boundary orders them).
A group with two passes of statistics (a layer norm) is not split.

HBM traffic. The row is read from global memory once: pass 1 writes what the
later passes need into a shared-memory row cache and each thread reads back
its own elements (no barrier needed). The cache holds either the row-varying
inputs the later passes read or the values they need that no reduction feeds
(`x + r` before a layer norm rather than `x` and `r`), whichever is smaller,
as far as it fits the target's static shared memory beside the tree scratch; what does
not fit is recomputed from global memory (mostly hitting L2).

Mean and variance follow the IR: `reduce_mean` is the sum divided by the
element count, and the decomposed layer_norm takes the variance as the mean of
the centred squares in a second pass over the cached row, so there is no
sum-of-squares cancellation and no need for Welford's update.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from xdsl.ir import BlockArgument, SSAValue

from fusec.analysis.group_body import compute_type, fits_domain
from fusec.codegen.branch_locals import distinct_locals
from fusec.codegen.kernel_source import (
    PARTIALS_SUFFIX,
    KernelParam,
    KernelSource,
    Workspace,
    float_literal,
    int_literal,
    kernel_header,
    launch_text,
)
from fusec.codegen.point_evaluator import (
    Loader,
    PointEvaluator,
    body_params,
    indent,
    load_expr,
    store_expr,
)
from fusec.codegen.reduction_index import row_index
from fusec.codegen.reduction_online import (
    chunk_update_lines,
    finish_lines,
    pair_tree_lines,
    split_combine_lines,
)
from fusec.codegen.reduction_registers import RowElements, Term, accumulate_lines
from fusec.codegen.reduction_tree import (
    block_combine_lines,
    combine,
    combine_lines,
    identity_literal,
    mean_scale,
)
from fusec.codegen.reduction_vector import aligned_condition, load_quad, store_quad
from fusec.dialects import nn
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import Shape, numel
from fusec.scheduling.group_plan import GroupPlan
from fusec.scheduling.reduction_plan import Frame, RowAnalysis
from fusec.scheduling.row_plan import RowPlan


def workspaces(rp: RowPlan) -> list[Workspace]:
    """A split schedule's workspaces: per reduction, the partial result of
    every (split, row); then, for a one-kernel split, one arrival counter per
    group of rows."""
    ra, sched = rp.rows, rp.schedule
    if sched.splits == 1:
        return []
    parts = [Workspace((sched.splits, ra.rows), compute_type(r.results[0]))
             for r in ra.reductions]
    if rp.two_kernels:
        return parts
    return [*parts, Workspace((sched.grid(ra.rows)[0],), "int32")]


def emit(plan: GroupPlan, kernel_name: str) -> KernelSource:
    """The kernel of a `kind = "reduction"` group, as its plan
    (`scheduling/row_plan.py`) says.

    Accepts any body of elementwise ops, splat constants and reductions that
    all read the same shape over the same axes (composites such as
    nn.softmax are expanded first). Raises a located `FusecError` otherwise.
    """
    rp = plan.detail_of(RowPlan)
    ra, sched = rp.rows, rp.schedule
    body = ra.body
    name = kernel_name  # from NameTable: unique in kernels.py
    text = _RowKernelWriter(rp).write(name)
    spaces = workspaces(rp)
    held = [KernelParam("workspace", k, (max(1, numel(w.shape)),))
            for k, w in enumerate(spaces)]
    before: list[KernelSource] = []
    if rp.two_kernels:
        # the second kernel only reads the partials the first one writes
        held, written = [replace(p, read_only=True) for p in held], held
        first = name + PARTIALS_SUFFIX  # kept free by NameTable.fresh
        before.append(KernelSource(
            name=first, text=_RowKernelWriter(rp, "partials").write(first),
            grid=sched.grid(ra.rows), block=sched.block,
            params=[p for p in body_params(body) if p.role == "input"] + written,
            notes=_notes(rp), workspaces=spaces))
    return KernelSource(
        name=name,
        text=text,
        grid=sched.grid(ra.rows),
        block=sched.block,
        params=body_params(body) + held,
        # Static shared arrays only: nothing to request at launch time.
        shared_bytes=0,
        notes=_notes(rp),
        workspaces=spaces,
        before=before,
    )


def _notes(rp: RowPlan) -> list[str]:
    ra, sched = rp.rows, rp.schedule
    kind = "column" if sched.column else "row"
    notes = [
        f"{kind} schedule over axes {list(ra.axes)}: {ra.rows} rows of {ra.row_length} "
        f"elements, {ra.stages} reduction pass(es)",
        f"static shared memory: {sched.scratch_bytes} bytes tree scratch, "
        f"{sched.cache_bytes} bytes row cache ({len(sched.cached)} row value(s) cached)",
    ]
    if sched.registers:
        notes.append(f"row held in registers: {sched.per_lane} element(s) per lane, "
                     "lanes combined by warp shuffles (shared-memory tree in the simulator)")
    if sched.vector > 1:
        notes.append(f"rows read and written {sched.vector} elements per access where every "
                     "such array is aligned (else one per access)")
    if rp.two_kernels:
        notes.append(f"rows split over {sched.splits} blocks of {sched.chunk} elements in two "
                     "kernels: the first writes each block's partial statistics (workspace), "
                     "the second combines them and writes its chunk's outputs")
    elif sched.splits > 1:
        notes.append(f"rows split over {sched.splits} blocks of {sched.chunk} elements; the "
                     "last block to arrive combines the partials (workspace)")
    return notes


class _RowKernelWriter:
    """Writes the kernel text of one row-wise reduction group: the whole
    group (`phase` "all"), or with split passes (see "Split passes") the
    first kernel (`"partials"`) or, under "all", the second."""

    def __init__(self, rp: RowPlan, phase: str = "all") -> None:
        ra = self.ra = rp.rows
        sched = self.sched = rp.schedule
        self.plan = rp
        self.phase = phase
        self.two_kernels = rp.two_kernels
        # A streamed online pass: the names of the elements one step left
        # for the chunked update (`_row_loop`).
        self.online_vals: list[str] = []
        self.body = ra.body
        self.ix = row_index(rp.index)
        # One coordinate per collapsed dimension (reduction_index).
        self.coords = [f"c{i}" for i in range(len(self.ix.shape))]
        # Per-row values: one evaluator per frame, both in the kernel's top scope.
        # A streamed element's coordinates: `j` itself when the row has one
        # collapsed dimension, else digits carried from element to element.
        self.element_coords = list(self.coords)
        if len(self.ix.reduce_dims) == 1:
            self.element_coords[self.ix.reduce_dims[0]] = "j"
        self.row_x = PointEvaluator(self.body, ra.shape, self.coords,
                                    loader=self._frame_loader("X"), itype=self.ix.itype)
        self.row_k = PointEvaluator(self.body, ra.kept_shape, self.coords, suffix="_k",
                                    loader=self._frame_loader("K"))
        self.elements: RowElements | None = None
        # Vector schedule: the quads loaded so far, by (input, index), as
        # their four element expressions (reduction_vector).
        self.quads: dict[tuple[BlockArgument, str], list[str]] = {}
        # The softmax (max, sum) reductions sharing pass 1 (schedule `online`).
        self.online = rp.online
        if sched.registers:
            self.elements = RowElements(
                sched.per_lane, sched.lanes, ra.row_length, self.ix,
                self._register_evaluator, self.coords, sched.vector,
            )

    def write(self, name: str) -> str:
        ra, s = self.ra, self.sched
        lines = self._setup()
        tests = aligned_condition(ra, s.vector) if s.vector > 1 else ""
        if tests:
            # One test per kernel: aligned arrays take the quads, a view at
            # an odd element the same passes one element per access.
            wide = self._body()
            scalar = _RowKernelWriter(replace(self.plan, schedule=replace(s, vector=1)),
                                      self.phase)._body()
            lines += [f"if {tests}:", *indent(wide, 1),
                      "else:", *indent(distinct_locals(wide, scalar), 1)]
        else:
            lines += self._body()
        head = kernel_header(
            self.body.group,
            self.body.ops,
            launch_text(
                s.grid(ra.rows), s.block,
                f"{s.lanes} lanes per row, {s.rows_per_block} rows per block"
                + (f", {s.splits} blocks per row" if s.splits > 1 else ""),
            ),
            _notes(self.plan),
        )
        params = self.body.signature()
        if self.phase == "partials":
            params = ", ".join(f"in{k}" for k in range(len(self.body.args)))
        if s.splits > 1:
            params += ", " + ", ".join(
                [f"part{k}" for k in range(len(ra.reductions))]
                + ([] if self.two_kernels else ["arrived"]))
        return "\n".join([*head, "@cuda.jit", f"def {name}({params}):", *indent(lines, 1)])

    def _body(self) -> list[str]:
        """The passes over the row, the lanes' combining, the per-row outputs."""
        ra = self.ra
        if self.phase == "partials":
            return self._pass(1) + self._combine(1)
        lines: list[str] = []
        for stage in range(1, ra.stages + 1):
            if self.online is not None and stage == 2:
                continue  # accumulated in pass 1, combined with it
            # Split passes: pass 1 ran in the first kernel; take its partials.
            lines += self._gather_partials() if self.two_kernels else self._pass(stage)
            lines += self._combine(stage)
        if self.plan.pass_roots(ra.stages + 1):
            lines += self._pass(ra.stages + 1)
        return lines + self._row_outputs()

    def _setup(self) -> list[str]:
        ra, s = self.ra, self.sched
        ix, t = self.ix, self.ix.itype
        lane, rloc = ("cuda.threadIdx.y", "cuda.threadIdx.x") if s.column else (
            "cuda.threadIdx.x", "cuda.threadIdx.y")
        lines = [
            f"lane = {t}({lane})",
            f"rloc = {t}({rloc})",
            f"row_raw = {t}({t}(cuda.blockIdx.x) * {ix.lit(s.rows_per_block)} + rloc)",
            f"live = row_raw < {ix.lit(ra.rows)}",
            "# rows past the end compute on the last row (barriers need every thread)",
            f"row = min(row_raw, {ix.lit(ra.rows - 1)})",
        ]
        lines += ix.unravel_lines("row", ix.kept_shape, [self.coords[i] for i in ix.kept_dims])
        for k, r in enumerate(ra.reductions):
            ctype = compute_type(r.results[0])
            lines.append(f"red{k} = cuda.shared.array({self._shape(s.lanes)}, {ctype})")
        for k, arg in enumerate(s.cached):
            lines.append(
                f"cache{k} = cuda.shared.array({self._shape(ra.row_length)}, "
                f"{compute_type(arg)})"
            )
        return lines

    def _shape(self, per_row: int) -> str:
        """The shape of a shared array of `per_row` slots per row of the
        block: `(rows, per_row)`, transposed in the column schedule."""
        s = self.sched
        if s.column:
            return f"({int_literal(per_row)}, {int_literal(s.rows_per_block)})"
        return f"({int_literal(s.rows_per_block)}, {int_literal(per_row)})"

    def _at(self, name: str, slot: str) -> str:
        """Element `slot` of this thread's row of shared array `name`."""
        return f"{name}[{slot}, rloc]" if self.sched.column else f"{name}[rloc, {slot}]"

    # --- passes over the row -------------------------------------------------------

    def _frame_loader(self, frame: Frame) -> Loader:
        """Loads of inputs read in `frame`, at collapsed coordinates."""
        body, ix = self.body, self.ix

        def load(arg: BlockArgument, shape: Shape, coords: Sequence[str]) -> str:
            return load_expr(body, arg, ix.index(shape, frame, coords))

        return load

    def _hoist(self, v: SSAValue) -> str | None:
        return None if self.ra.value_varies(v) else self.row_x.value(v)

    def _element_evaluator(self, v: int | None = None) -> PointEvaluator:
        """An evaluator for one row element (element `v` of the quad at `jq`
        in a vector pass); values constant along the row are computed once,
        in the top scope, and referenced by name."""
        coords = self.element_coords if v is None else self._quad_coords(f"jv{v}")
        ev = PointEvaluator(
            self.body, self.ra.shape, coords, loader=self._frame_loader("X"),
            hoist=self._hoist, suffix="" if v is None else f"_v{v}", itype=self.ix.itype,
        )
        if v is not None:
            ev.loader = self._quad_loader(ev, v, self._quad_coords("jq"), "")
        return ev

    def _register_evaluator(self, e: int, coords: list[str]) -> PointEvaluator:
        """The evaluator of register element `e` (index `j<e>`, names `*_<e>`)."""
        ev = PointEvaluator(
            self.body, self.ra.shape, coords, loader=self._frame_loader("X"),
            suffix=f"_{e}", hoist=self._hoist, itype=self.ix.itype,
        )
        if self.sched.vector > 1:
            q, v = divmod(e, self.sched.vector)
            ev.loader = self._quad_loader(ev, v, self._quad_coords(f"jq{q}"), f"_{q}")
        return ev

    def _quad_coords(self, name: str) -> list[str]:
        """The collapsed coordinates of a point whose (one) reduced coordinate is `name`."""
        coords = list(self.coords)
        coords[self.ix.reduce_dims[0]] = name
        return coords

    def _quad_loader(self, ev: PointEvaluator, v: int, quad: list[str], suffix: str) -> Loader:
        """Loads of element `v` of the quad at coordinates `quad`: the first
        element to read an input loads its quad (one access, a line of
        `ev`), the others take their element of it."""
        scalar = self._frame_loader("X")

        def load(arg: BlockArgument, shape: Shape, coords: Sequence[str]) -> str:
            if not self.ra.arg_varies(arg):
                return scalar(arg, shape, coords)
            index = self.ix.index(shape, "X", quad)
            if (arg, index) not in self.quads:
                k = self.body.arg_index(arg)
                line, elements = load_quad(arg, f"quad{k}{suffix}", f"in{k}", index,
                                           self.sched.vector)
                ev.lines.append(line)
                self.quads[arg, index] = elements
            return self.quads[arg, index][v]

        return load

    def _pass(self, stage: int) -> list[str]:
        ra, s = self.ra, self.sched
        if self.elements is not None:
            return self._register_pass(stage, self.elements)
        final = stage > ra.stages
        self.online_vals = []
        if s.vector > 1:
            body_lines = self._quad_body(stage)
        else:
            body_lines = self._element_lines(stage, self._element_evaluator(), "j", None)
        hoisted = self.row_x.take_lines() + self.row_k.take_lines()
        head = [f"# pass {stage}: " + ("store the row-shaped outputs" if final else
                                       ", ".join(r.name for r in self._stage_reductions(stage)))]
        accs = [] if final else [
            f"acc{ra.reductions.index(r)} = {identity_literal(r)}"
            for r in self._stage_reductions(stage) + self._online_extra(stage)
        ]
        return head + hoisted + accs + self._row_loop(body_lines, self.online_vals)

    def _element_lines(self, stage: int, ev: PointEvaluator, slot: str,
                       finals: list[list[str]] | None) -> list[str]:
        """One element of streamed pass `stage` (`slot`: its row-cache slot):
        read back what pass 1 cached, accumulate, or store the row-shaped
        outputs (or, for a quad, collect their values in `finals`)."""
        ra, s = self.ra, self.sched
        lines: list[str] = []
        if stage > 1:  # read back what pass 1 cached
            for k, v in enumerate(s.cached):
                ev.bound[v] = self.body.names[v] + ev.suffix
                lines.append(f"{ev.bound[v]} = {self._at(f'cache{k}', slot)}")
        for k, root in enumerate(self.plan.pass_roots(stage)):
            val = ev.value(root)
            lines += ev.take_lines()
            if stage > ra.stages:
                if finals is None:
                    lines += self._store_varying(root, val)
                else:
                    finals[k].append(val)
            elif self.online is not None:  # folded a chunk at a time (`_row_loop`)
                lines.append(f"online_v{ev.suffix} = {val}")
                self.online_vals.append(f"online_v{ev.suffix}")
            else:
                r = self._stage_reductions(stage)[k]
                lines.append(_accumulate(r, f"acc{ra.reductions.index(r)}", val))
        return lines + self._cache_lines(stage, ev, slot)

    def _quad_body(self, stage: int) -> list[str]:
        """One quad of streamed pass `stage` (at `jq`): its four elements,
        then the row-shaped outputs' quad stores. The row cache keeps element
        `v` of quad `jq / 4` at slot `v * n / 4 + jq / 4`, so the lanes of a
        warp touch consecutive words (no bank conflicts)."""
        ix, n = self.ix, self.ra.row_length
        self.quads = {}  # every step loads its own quads
        roots = self.plan.pass_roots(stage)
        finals: list[list[str]] = [[] for _ in roots]
        lines: list[str] = []
        vec = self.sched.vector
        for v in range(vec):
            lines.append(f"jv{v} = {ix.itype}(jq + {ix.lit(v)})")
            slot = f"{ix.lit(v * n // vec)} + jq // {ix.lit(vec)}"
            lines += self._element_lines(stage, self._element_evaluator(v), slot, finals)
        if stage > self.ra.stages:
            for root, vals in zip(roots, finals, strict=True):
                lines += self._store_quad(root, vals, "", self._quad_coords("jq"))
        return lines

    def _register_pass(self, stage: int, els: RowElements) -> list[str]:
        """Pass `stage` over the lane's register elements, unrolled; values
        of earlier passes are reused by name."""
        ra = self.ra
        roots = self.plan.pass_roots(stage)
        final = stage > ra.stages
        reds = [] if final else self._stage_reductions(stage)
        terms: list[list[Term]] = [[] for _ in reds]
        body: list[str] = []
        # Every store after every load: the compiler must assume an output may
        # alias an input, so a load placed after a store waits for it.
        stores: list[str] = []
        if stage == 1:
            # Inputs constant along the row (an epsilon, a per-row bias) are
            # loaded before the row, so their latency hides behind it rather
            # than stalling the pass that needs them after the reductions.
            for arg in self.body.args:
                if _row_constant_x_input(ra, arg):
                    self.row_x.value(arg)
        quad: list[list[str]] = [[] for _ in roots]  # a vector row's values of one quad
        for e in range(els.count):
            ev, guard = els.evaluators[e], els.guards[e]
            body += els.index_lines(e)
            for k, root in enumerate(roots):
                val = ev.value(root)
                body += ev.take_lines()
                if final and self.sched.vector > 1:
                    quad[k].append(val)
                    if len(quad[k]) == self.sched.vector:
                        at = self._quad_coords(f"jq{e // self.sched.vector}")
                        stores += self._store_quad(root, quad[k], guard, at)
                        quad[k] = []
                elif final:
                    stores += self._store_varying(root, val, guard, ev.coords)
                else:
                    terms[k].append((val, guard))
        body += stores
        hoisted = self.row_x.take_lines() + self.row_k.take_lines()
        accs: list[str] = []
        for r, t in zip(reds, terms, strict=True):
            accs += accumulate_lines(r, f"acc{ra.reductions.index(r)}", identity_literal(r), t)
        head = [f"# pass {stage} (row in registers): " + (
            "store the row-shaped outputs" if final else ", ".join(r.name for r in reds))]
        return head + hoisted + body + accs

    def _row_loop(self, body: list[str], vals: Sequence[str] = ()) -> list[str]:
        """This lane's elements of its row, `lanes` apart (of this block's
        chunk of it, when rows are split). Without bounds checks the body is
        written out `unroll` times per step (the schedule's `unroll`), so each lane
        has that many loads in flight; the rest of the trip follows. Several
        reduced coordinates are digits advanced per element
        (`RowIndex.advance_lines`), not divided out of `j`.

        An online pass's body leaves its elements in `vals`: they are
        folded once per `unroll` steps (`chunk_update_lines`), after all of
        their loads, also in a bounds-checked loop (an element past the end
        enters as `-inf`)."""
        n, s, ix = self.ra.row_length, self.sched, self.ix
        # A vector pass walks quads: `jq`, `lanes` quads apart.
        lanes, var = s.lanes * s.vector, "jq" if s.vector > 1 else "j"
        span = s.chunk if s.splits > 1 else n
        first = f"{ix.itype}(cuda.blockIdx.y) * {ix.lit(s.chunk)} + " if s.splits > 1 else ""
        lane = f"lane * {ix.lit(s.vector)}" if s.vector > 1 else "lane"
        trips = -(-span // lanes)
        digits = [self.coords[i] for i in ix.reduce_dims] if len(ix.reduce_dims) > 1 else []
        lines = [f"j_first = {ix.itype}({first}{lane})"]
        lines += ix.unravel_lines("j_first", ix.reduce_shape, digits) if digits else []
        step = ix.advance_lines(digits, lanes) if digits else []
        guarded = bool(n % lanes or (s.splits > 1 and s.splits * s.chunk != n))

        def at(e: str, u: int) -> list[str]:
            """Step `u` of a group of steps, at element number `e`."""
            lines = [f"{var} = {ix.itype}(j_first + {ix.itype}({e}) * {ix.lit(lanes)})"]
            kept = [f"o{u}_{i} = {v}" for i, v in enumerate(vals)]
            if guarded:
                ninf = float_literal(float("-inf"), compute_type(self.online[0].results[0])) \
                    if self.online is not None else ""
                lines += [f"if {var} < {ix.lit(n)}:", *indent(body + kept, 1)]
                lines += ["else:", *indent([f"o{u}_{i} = {ninf}" for i in range(len(vals))],
                                           1)] if vals else []
            else:
                lines += body + kept
            return lines + step

        def fold(count: int) -> list[str]:
            if not vals or self.online is None:
                return []
            r_max, r_sum = self.online
            return chunk_update_lines(
                r_max, f"acc{self.ra.reductions.index(r_max)}",
                f"acc{self.ra.reductions.index(r_sum)}",
                [f"o{u}_{i}" for u in range(count) for i in range(len(vals))])

        # `unroll` counts row elements: a quad is `vector` of them. A
        # bounds-checked loop is unrolled only to chunk an online pass.
        unroll = max(1, min(s.unroll // s.vector, trips))
        unroll = 1 if guarded and not vals else unroll
        lines.append(f"for e in range({int_literal(trips // unroll)}):")
        for u in range(unroll):
            e = f"e * {int_literal(unroll)} + {int_literal(u)}" if unroll > 1 else "e"
            lines += indent(at(e, u), 1)
        lines += indent(fold(unroll), 1)
        if trips % unroll:
            lines += [f"for e in range({int_literal(trips - trips % unroll)}, "
                      f"{int_literal(trips)}):", *indent(at("e", 0), 1), *indent(fold(1), 1)]
        return lines

    def _cache_lines(self, stage: int, ev: PointEvaluator, slot: str) -> list[str]:
        """Pass 1 writes every cached value of its element (computing those
        its reductions did not need) at row-cache slot `slot`."""
        if stage != 1:
            return []
        lines: list[str] = []
        for k, v in enumerate(self.sched.cached):
            val = ev.value(v)
            lines += [*ev.take_lines(), f"{self._at(f'cache{k}', slot)} = {val}"]
        return lines

    def _online_extra(self, stage: int) -> list[nn.ReduceOp]:
        """The sum that pass `stage` accumulates beside its own reductions
        (the online softmax's, in pass 1)."""
        return [self.online[1]] if self.online is not None and stage == 1 else []

    def _stage_reductions(self, stage: int) -> list[nn.ReduceOp]:
        return [r for r in self.ra.reductions if self.ra.stage[r.results[0]] == stage]

    def _store_varying(self, v: SSAValue, val: str, inside: str = "",
                       coords: Sequence[str] | None = None) -> list[str]:
        """Store row-varying output `v` (`val` at this element); `inside` is
        the guard of an element that may lie past the row's end."""
        lines: list[str] = []
        coords = self.element_coords if coords is None else coords
        for k, out in enumerate(self.body.outputs):
            if out is not v:
                continue
            shape, dims = tensor_shape(v), range(len(self.ix.shape))
            owner = self.ix.owner_guard(shape, "X", coords, dims)
            guard = " and ".join(t for t in ("live", inside, owner) if t)
            index = self.ix.index(shape, "X", coords)
            lines += [f"if {guard}:", f"    out{k}[{index}] = {store_expr(v, val)}"]
        return lines

    def _store_quad(self, v: SSAValue, vals: list[str], inside: str,
                    quad: Sequence[str]) -> list[str]:
        """Store the quad `vals` of row-varying output `v` at coordinates
        `quad` (the quad's first element); `inside` as in `_store_varying`."""
        lines: list[str] = []
        for k, out in enumerate(self.body.outputs):
            if out is not v:
                continue
            shape = tensor_shape(v)
            owner = self.ix.owner_guard(shape, "X", quad, range(len(self.ix.shape)))
            guard = " and ".join(t for t in ("live", inside, owner) if t)
            index = self.ix.index(shape, "X", quad)
            lines += [f"if {guard}:", f"    {store_quad(v, f'out{k}', index, vals)}"]
        return lines

    # --- combining lanes, per-row results ----------------------------------------

    def _combine(self, stage: int) -> list[str]:
        ra, s = self.ra, self.sched
        reds = self._stage_reductions(stage) + self._online_extra(stage)
        idx = [ra.reductions.index(r) for r in reds]
        if s.registers:
            lines = block_combine_lines(reds, idx, s.lanes, s.lanes * s.rows_per_block)
        elif self.online is not None:
            lines = [f"{self._at(f'red{k}', 'lane')} = acc{k}" for k in idx]
            lines += pair_tree_lines(self.online[0], idx[0], idx[1], s.lanes, s.column)
        else:
            lines = [f"{self._at(f'red{k}', 'lane')} = acc{k}" for k in idx]
            lines += combine_lines(reds, idx, s.lanes, s.column)
        if self.phase == "partials":
            return lines + self._publish_partials(idx)
        if s.splits > 1 and not self.two_kernels:
            lines += self._combine_splits(reds, idx)
        for k, r in zip(idx, reds, strict=True):
            res = f"acc{k}" if s.registers else self._at(f"red{k}", "0")
            if isinstance(r, nn.ReduceMeanOp):
                res = f"{res} * {mean_scale(r, ra.row_length)}"
            lines.append(f"res{k} = {res}")
            target = self.row_x if ra.frame[r.results[0]] == "X" else self.row_k
            target.bound[r.results[0]] = f"res{k}"
        if self.online is not None and stage == 1:
            lines += finish_lines(self.online[0], f"res{idx[0]}", f"res{idx[1]}")
        return lines

    def _publish_partials(self, idx: list[int]) -> list[str]:
        """The first kernel of split passes: this block's partials (after
        its tree, in slot 0) to the workspace, `part<k>[split, row]`."""
        ix = self.ix
        return ["if live and lane == 0:"] + [
            f"    part{k}[{ix.itype}(cuda.blockIdx.y) * {ix.lit(self.ra.rows)} + row] = "
            f"{self._at(f'red{k}', '0')}" for k in idx]

    def _gather_partials(self) -> list[str]:
        """The second kernel of split passes: each lane folds every
        `lanes`-th split's partials of its row into `acc<k>`, for the tree
        of `_combine` (kernels of one stream run in order: plain loads)."""
        s, ix, ra = self.sched, self.ix, self.ra
        reds = self._stage_reductions(1) + self._online_extra(1)
        lines = ["# split passes: the partials the first kernel left, one split per lane"]
        lines += [f"acc{ra.reductions.index(r)} = {identity_literal(r)}" for r in reds]
        body: list[str] = []
        for r in reds:
            k = ra.reductions.index(r)
            body.append(f"partial{k} = part{k}[q * {ix.lit(ra.rows)} + row]")
        if self.online is not None:
            km, ks = (ra.reductions.index(r) for r in self.online)
            body += split_combine_lines(self.online[0], f"acc{km}", f"acc{ks}",
                                        f"partial{km}", f"partial{ks}")
        else:
            for r in reds:
                k = ra.reductions.index(r)
                body.append(f"acc{k} = {combine(r, f'acc{k}', f'partial{k}')}")
        loop = f"for q in range(int64(lane), {int_literal(s.splits)}, {int_literal(s.lanes)}):"
        return [*lines, loop, *indent(body, 1)]

    def _combine_splits(self, reds: list[nn.ReduceOp], idx: list[int]) -> list[str]:
        """After the block's tree (its partial in `red<k>`'s slot 0): publish
        the partials, and let only the last block of this row group go on,
        with every split's partial combined (see "Split rows")."""
        s = self.sched
        first = "cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0"
        lines = ["# split rows: publish this block's partials; the last block combines them",
                 "if live and lane == 0:"]
        ix = self.ix
        lines += [f"    part{k}[{ix.itype}(cuda.blockIdx.y) * {ix.lit(self.ra.rows)} + row] = "
                  f"{self._at(f'red{k}', '0')}" for k in idx]
        lines += [
            "cuda.threadfence()",
            "ticket = cuda.shared.array(1, int32)",
            "cuda.syncthreads()",
            f"if {first}:",
            "    ticket[0] = cuda.atomic.add(arrived, cuda.blockIdx.x, 1)",
            "cuda.syncthreads()",
            f"if ticket[0] != {int_literal(s.splits - 1)}:",
            "    return",
            f"if {first}:",
            "    arrived[cuda.blockIdx.x] = 0  # ready for the next launch",
        ]
        for r, k in zip(reds, idx, strict=True):
            read = (f"cuda.atomic.add(part{k}, q * {int_literal(self.ra.rows)} + row, "
                    f"{compute_type(r.results[0])}(0))")
            lines += [
                f"acc{k} = {identity_literal(r)}",
                f"for q in range(int64(lane), {int_literal(s.splits)}, {int_literal(s.lanes)}):",
                f"    partial = {read}",
                f"    acc{k} = {combine(r, f'acc{k}', 'partial')}",
                f"{self._at(f'red{k}', 'lane')} = acc{k}",
            ]
        return lines + combine_lines(reds, idx, s.lanes, s.column)

    def _row_outputs(self) -> list[str]:
        """Per-row outputs, stored by lane 0 of each live row."""
        ra = self.ra
        lines: list[str] = []
        for k, v in enumerate(self.body.outputs):
            frame: Frame = ra.frame.get(v, "X")
            if ra.stored_per_element(v):
                continue
            ev = self.row_x if frame == "X" else self.row_k
            val = ev.value(v)
            lines += ev.take_lines()
            shape = tensor_shape(v)
            # one store per element: the kept coordinates it broadcasts along are 0
            owner = self.ix.owner_guard(shape, frame, ev.coords, self.ix.kept_dims)
            # split passes: every split has the row's results; the first stores them
            split = "cuda.blockIdx.y == 0" if self.two_kernels else ""
            guard = " and ".join(t for t in ("live", "lane == 0", split, owner) if t)
            index = self.ix.index(shape, frame, ev.coords)
            lines += [f"if {guard}:", f"    out{k}[{index}] = {store_expr(v, val)}"]
        return lines


def _row_constant_x_input(ra: RowAnalysis, arg: BlockArgument) -> bool:
    """Whether `arg` is one number per row, read only by ops evaluated at
    full (frame X) coordinates: then it can be loaded at the kernel's start."""
    uses = list(arg.uses)
    return bool(uses) and not ra.arg_varies(arg) and fits_domain(tensor_shape(arg), ra.shape) \
        and all(ra.frame.get(u.operation.results[0]) == "X" for u in uses)


def _accumulate(r: nn.ReduceOp, acc: str, val: str) -> str:
    if isinstance(r, nn.ReduceMaxOp | nn.ReduceMinOp):
        return f"{acc} = {combine(r, acc, val)}"
    return f"{acc} += {val}"


