"""Kernels for `kind = "contraction"` groups: a batched `nn.matmul` (NumPy
semantics, batch dimensions broadcast) as a shared-memory tiled SIMT GEMM,
with the group's elementwise epilogue applied in registers before the store.

```mlir
%y = fusion.group (%x, %w, %b) {kind = "contraction"} : (...) -> tensor<64x32xf32> {
^bb0(%xa: tensor<64x48xf32>, %wa: tensor<48x32xf32>, %ba: tensor<32xf32>):
  %m = nn.matmul %xa, %wa : (tensor<64x48xf32>, tensor<48x32xf32>) -> tensor<64x32xf32>
  %s = nn.add %m, %ba : (tensor<64x32xf32>, tensor<32xf32>) -> tensor<64x32xf32>
  %g = nn.gelu %s : tensor<64x32xf32>
  fusion.yield %g : tensor<64x32xf32>
}
```

Schedule. One block computes a `BM x BN` tile of one batch entry
(`blockIdx.z`); its threads form a `(BM/TM) x (BN/TN)` grid and each owns a
`TM x TN` micro-tile of accumulators in registers. Rows and columns of a
micro-tile are interleaved with stride `BM/TM` and `BN/TN` (not contiguous), so
a warp's shared-memory reads of B hit consecutive banks and its stores of C
are coalesced. K advances `BK` at a time through two shared-memory buffers:
the next tile is fetched from global memory into registers before the current
one is multiplied and stored into the other buffer after it, so global
latency hides behind the FMAs and each step needs a single barrier. A is
stored transposed (`As[k][m]`, rows padded by `SMEM_PAD` against bank conflicts
of the transposing store). Loads and stores are guarded only along the
dimensions that are not multiples of the tile.

Any value of the epilogue (including the raw product) may be a group output;
every epilogue value must broadcast to the product's shape. An operand
computed in the group (a transposed weight, a scaled query) is evaluated per
loaded element (`operand_reader`): correct for any prologue, but a transposed
operand is then read uncoalesced, so the direct path serves group inputs.
"""

from __future__ import annotations

from fusec.analysis.group_body import compute_type
from fusec.codegen.gemm_operands import OperandTile
from fusec.codegen.gemm_tile_text import tile_col, tile_row
from fusec.codegen.kernel_source import (
    KernelSource,
    float_literal,
    int_literal,
    kernel_header,
    launch_text,
    unravel,
)
from fusec.codegen.launch_grid import block_index_lines
from fusec.codegen.point_evaluator import PointEvaluator, body_params, indent, store_lines
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import fmt, numel
from fusec.scheduling.contraction_schedule import (
    LARGE_TILE,
    MEDIUM_TILE,
    SMALL_TILE,
    SMEM_PAD,
    GemmTile,
    gemm_shared_bytes,
)
from fusec.scheduling.gemm_plan import GemmPlan
from fusec.scheduling.gemm_shape import GemmShape
from fusec.scheduling.group_plan import GroupPlan

__all__ = ["LARGE_TILE", "MEDIUM_TILE", "SMALL_TILE", "GemmTile", "emit"]

def emit(plan: GroupPlan, kernel_name: str) -> KernelSource:
    """The kernel of a `kind = "contraction"` group (see the module
    docstring), as its plan (`scheduling/gemm_plan.py`) says."""
    gp = plan.detail_of(GemmPlan)
    g, tile, flat = gp.shape, gp.tile, plan.body
    body = g.body
    name = kernel_name  # from NameTable: unique in kernels.py
    grid = (-(-g.n // tile.bn), -(-g.m // tile.bm), grid_z(g))
    block = (tile.threads, 1, 1)
    notes = [
        f"C[{fmt(g.out)}] = A[{fmt(tensor_shape(g.a))}] @ B[{fmt(tensor_shape(g.b))}], "
        f"tile {tile.bm}x{tile.bn}x{tile.bk}, {tile.tm}x{tile.tn} per thread",
        f"static shared memory: {_shared_bytes(g, tile)} bytes (double-buffered A and B tiles)",
    ]
    per_thread = f"{tile.tm}x{tile.tn} outputs per thread"
    head = kernel_header(flat, body.ops, launch_text(grid, block, per_thread), notes)
    writer = _GemmWriter(g, tile)
    lines = writer.lines()
    text = "\n".join(
        [*head, "@cuda.jit", f"def {name}({body.signature()}):", *indent(lines, 1)]
    )
    return KernelSource(name, text, grid, block, body_params(body), shared_bytes=0, notes=notes,
                        grid_loops=writer.grid_loops)


def grid_z(g: GemmShape) -> int:
    """Batch entries: the z extent of the grid (1 for a plain matmul)."""
    return max(1, numel(g.batch))


def _shared_bytes(g: GemmShape, t: GemmTile) -> int:
    item = 8 if compute_type(g.matmul.result) == "float64" else 4
    return gemm_shared_bytes(t, item)


class _GemmWriter:
    """Writes the body of one GEMM kernel, fully unrolled over the micro-tile:
    accumulators, fragments and prefetch registers are scalar variables
    (`c3_5`, `fa3`, `ga1`), because numba leaves indexed local arrays in
    local memory."""

    def __init__(self, g: GemmShape, t: GemmTile) -> None:
        self.g = g
        self.t = t
        self.ctype = compute_type(g.matmul.result)
        self.zero = float_literal(0.0, self.ctype)
        self.tiles = -(-g.k // t.bk)
        self.a = OperandTile("a", g.a, g.m, g.k, t.bm, t.bk, t.threads, "m0", "k0")
        self.b = OperandTile("b", g.b, g.k, g.n, t.bk, t.bn, t.threads, "k0", "n0")
        self.batch_lines, self.bcoords = unravel("bz", g.batch, prefix="b")
        self.grid_loops: frozenset[str] = frozenset()  # set by lines()

    def lines(self) -> list[str]:
        """The kernel body: the block's fixed setup, then its batch entry
        (z) and M tile (y), each a grid-stride loop where it passes the grid
        limit (`codegen/launch_grid.py`)."""
        g, t = self.g, self.t
        tile = [
            f"m0 = mt * {int_literal(t.bm)}",
            *self.batch_lines,
            *self._setup(),
            "# stage the first K tile",
            *self._load_tile("0"),
            *self._store_tile("0"),
            "cuda.syncthreads()",
            *self._main_loop(),
            *self._epilogue(),
        ]
        # No barrier between trips: the K loop ends at one after its last
        # shared reads, so the next trip may stage its first tile at once.
        loops = [("bz", "z", grid_z(g)), ("mt", "y", -(-g.m // t.bm))]
        body, self.grid_loops = block_index_lines(loops, tile)
        return [*self._block_setup(), *body]

    def _block_setup(self) -> list[str]:
        """What does not depend on the batch entry or the M tile."""
        t, ct = self.t, self.ctype
        return [
            "tid = cuda.threadIdx.x",
            f"tx = tid % {int_literal(t.threads_n)}",
            f"ty = tid // {int_literal(t.threads_n)}",
            f"n0 = cuda.blockIdx.x * {int_literal(t.bn)}",
            f"As = cuda.shared.array((2, {t.bk}, {t.bm + SMEM_PAD}), {ct})",
            f"Bs = cuda.shared.array((2, {t.bk}, {t.bn + SMEM_PAD}), {ct})",
        ]

    def _setup(self) -> list[str]:
        g, t = self.g, self.t
        lines = [
            f"# the element of each tile this thread fetches first (A: {self.a.mode}, "
            f"B: {self.b.mode})",
            *self.a.setup(g.body, g.batch, self.bcoords),
            *self.b.setup(g.body, g.batch, self.bcoords),
        ]
        lines += [
            f"c{i}_{j} = {self.zero}" for i in range(t.tm) for j in range(t.tn)
        ]
        return lines

    def _guard(self, terms: list[tuple[str, int, int]]) -> str:
        """`gm < M and gk < K`, keeping only the dimensions a tile can overrun."""
        return " and ".join(f"{v} < {int_literal(size)}" for v, size, step in terms if size % step)

    def _load_tile(self, kt: str) -> list[str]:
        """Global -> registers `ga<e>`, `gb<e>`: the A and B tiles of K tile `kt`."""
        g = self.g
        lines = [f"k0 = ({kt}) * {int_literal(self.t.bk)}"]
        for op in (self.a, self.b):
            for e in range(op.loads):
                guard = self._guard(op.guard_terms(e))
                lines += op.load_lines(
                    e, f"g{op.p}{e}", guard, self.zero, g.body, self.bcoords, g.batch
                )
        return lines

    def _store_tile(self, buf: str) -> list[str]:
        """Registers -> shared buffer `buf` (A transposed: As[k][m])."""
        lines: list[str] = []
        for e in range(self.a.loads):
            r, c = self.a.position(e)
            lines.append(f"As[{buf}, {c}, {r}] = ga{e}")
        for e in range(self.b.loads):
            r, c = self.b.position(e)
            lines.append(f"Bs[{buf}, {r}, {c}] = gb{e}")
        return lines

    def _main_loop(self) -> list[str]:
        t = self.t
        more = f"kt + 1 < {int_literal(self.tiles)}"
        frags = [f"fa{i} = As[cur, kk, {tile_row(t, i, 'ty')}]" for i in range(t.tm)]
        frags += [f"fb{j} = Bs[cur, kk, {tile_col(t, j, 'tx')}]" for j in range(t.tn)]
        fmas = [
            f"c{i}_{j} = cuda.fma(fa{i}, fb{j}, c{i}_{j})" for i in range(t.tm) for j in range(t.tn)
        ]
        return [
            f"for kt in range({int_literal(self.tiles)}):",
            "    cur = kt % 2",
            f"    if {more}:  # fetch the next K tile while this one is multiplied",
            *indent(self._load_tile("kt + 1"), 2),
            f"    for kk in range({t.bk}):",
            *indent(frags + fmas, 2),
            f"    if {more}:",
            *indent(self._store_tile("1 - cur"), 2),
            "    cuda.syncthreads()",
        ]

    def _epilogue(self) -> list[str]:
        """Per accumulator: the epilogue ops, then the stores of every output."""
        g, t = self.g, self.t
        lines = ["# epilogue in registers, then the stores"]
        lines += [f"cn{j} = n0 + {tile_col(t, j, 'tx')}" for j in range(t.tn)]
        for i in range(t.tm):
            row = [f"cm = m0 + {tile_row(t, i, 'ty')}"]
            m_guard = self._guard([("cm", g.m, t.bm)])
            cells: list[str] = []
            for j in range(t.tn):
                cell = self._cell(f"c{i}_{j}", f"cn{j}")
                n_guard = self._guard([(f"cn{j}", g.n, t.bn)])
                cells += [f"if {n_guard}:", *indent(cell, 1)] if n_guard else cell
            lines += row + ([f"if {m_guard}:", *indent(cells, 1)] if m_guard else cells)
        return lines

    def _cell(self, acc: str, n: str) -> list[str]:
        g = self.g
        coords = [*self.bcoords, "cm", n]
        ev = PointEvaluator(g.body, g.out, coords, bound={g.matmul.result: acc})
        lines: list[str] = []
        for k, v in enumerate(g.body.outputs):
            val = ev.value(v)
            lines += ev.take_lines()
            lines += store_lines(k, v, val, g.out, coords)
        return lines
