"""Generated code that stages tiles into shared memory for the tiled window
kernels (`codegen/window_tiled.py`), and the index arithmetic it is written
with.

A `Tile` says where element (plane, row, col) comes from and whether it is
real; a `Stager` spreads its elements over a block's threads and writes

```python
xs_r = tid // 128                  # the thread's first element of the plane
xs_c = tid % 128
xs_v0 = in0[numba.uint64(...)]     # loads, STAGE_BATCH in flight at once
xs_v1 = in0[numba.uint64(...)]     # (each a constant offset from the first)
xs[numba.uint64(xs_r), numba.uint64(xs_c)] = xs_v0 if ... else float32(0.0)
xs[numba.uint64(xs_r + 2), numba.uint64(xs_c)] = xs_v1 if ... else float32(0.0)
```

and the channel-step loop around the FMAs, pipelined (the next step loaded
into registers before this one is multiplied, stored after it) when a
thread stages few elements. Indices are unsigned (`numba.uint64`): numba
then skips its negative-index wraparound and LLVM folds constant offsets
into one address register. Elements outside the input are read at clamped
coordinates and replaced by the padding value when stored.

A tile of which a thread stages more than `UNROLL_BUDGET` elements per step
(a 16x16 patch conv's halo and weights) is staged by a loop instead, one
element per iteration, its position computed from the flat index:

```python
for xs_k in range(224):
    xs_e = tid + xs_k * 32
    xs_lr = xs_e // 112
    xs_lc = xs_e % 112
    xs_v = in0[numba.uint64(...)]
    xs[numba.uint64(xs_lr), numba.uint64(xs_lc)] = xs_v
```
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fusec.codegen.kernel_source import int_literal
from fusec.codegen.point_evaluator import indent
from fusec.scheduling.window_plan import STAGE_BATCH, UNROLL_BUDGET, pass_scheme, tile_passes

# --- index arithmetic in generated code -----------------------------------------------------


def times(var: str, k: int) -> str:
    """`var * k`, or `var` when k is 1."""
    return var if k == 1 else f"{var} * {int_literal(k)}"


def plus(expr: str, k: int) -> str:
    """`expr + k`, or `expr` when k is 0."""
    return f"{expr} + {int_literal(k)}" if k else expr


def minus(expr: str, k: int) -> str:
    """`expr - k`, or `expr` when k is 0."""
    return f"{expr} - {int_literal(k)}" if k else expr


def clamp(expr: str, low: int | None, high: int) -> str:
    """`expr` clamped into [low, high] (no lower bound when `low` is None)."""
    inner = expr if low is None else f"max({expr}, {int_literal(low)})"
    return f"min({inner}, {int_literal(high)})"


def at(*index: str) -> str:
    """An index tuple whose entries are non-negative by construction, as
    unsigned integers (see the module docstring)."""
    return ", ".join(f"numba.uint64({i})" for i in index)


def guarded(terms: list[str], body: list[str]) -> list[str]:
    """`body` under `if a and b:` for the terms that are not always true."""
    if not terms:
        return body
    return [f"if {' and '.join(terms)}:", *indent(body, 1)]


# --- tiles -------------------------------------------------------------------------------------

# (plane, row, column, channel-step base, suffix) -> (lines, value), addresses in range
Reader = Callable[[int, str, str, str, str], tuple[list[str], str]]
# (plane, row, column, channel-step base) -> the terms under which the element is real
Validity = Callable[[int, str, str, str], list[str]]


@dataclass
class Tile:
    """`planes` planes of `rows x cols` staged into the shared array
    `name` (plane p's row r at row `p * rows + r`): element (plane, row,
    col) is `read` (at clamped coordinates) and replaced by `pad` unless
    every `valid` term holds. A thread stages the same positions of every
    plane, so what it computes about a position (halo clamps, padding
    checks) is shared by the input channels of a step."""

    name: str
    tag: str  # prefix of the names of its staged registers
    rows: int
    cols: int
    read: Reader
    valid: Validity
    pad: str
    transposed: bool = False  # element (row, col) goes to name[col, row]
    planes: int = 1


@dataclass
class Pass:
    """One element of a tile per thread: the lines placing it (written
    with its first plane) and its position (variable names or simple
    sums)."""

    lines: list[str]
    row: str
    col: str
    plane: int = 0
    first: bool = True


Staged = tuple[Tile, int, Pass]  # an element of a tile, numbered within it


@dataclass
class Stager:
    """Writes the staging of tiles by a block of `threads` threads (`tid`)."""

    threads: int

    def passes(self, tile: Tile) -> tuple[list[str], list[Pass]]:
        """Setup lines and the positions of the thread's elements of a
        plane of `tile`. Whole rows per pass (`threads // cols` of them, or
        a long row in chunks of `threads`) when that takes no more passes
        than spreading the plane flat: each pass is then a constant offset
        from the thread's first element. A position past the plane is
        clamped to its last row or column (the same element, the same value
        stored twice)."""
        threads, rows, cols, tag = self.threads, tile.rows, tile.cols, tile.tag
        scheme = pass_scheme(rows, cols, threads)
        first = [f"{tag}_r = tid // {int_literal(cols)}", f"{tag}_c = tid % {int_literal(cols)}"]
        out: list[Pass] = []
        if scheme == "rows":
            step = threads // cols
            highest = (threads - 1) // cols  # the first row of the last threads
            for k in range(-(-rows // step)):
                row = plus(f"{tag}_r", k * step)
                if k * step + highest < rows:
                    out.append(Pass([], row, f"{tag}_c"))
                else:
                    out.append(Pass([f"{tag}_r{k} = {clamp(row, None, rows - 1)}"],
                                    f"{tag}_r{k}", f"{tag}_c"))
            return first, out
        if scheme == "chunks":
            for r in range(rows):
                for m in range(-(-cols // threads)):
                    col = plus("tid", m * threads)
                    if (m + 1) * threads <= cols:
                        out.append(Pass([], int_literal(r), col))
                    else:
                        name = f"{tag}_c{r}_{m}"
                        out.append(Pass([f"{name} = {clamp(col, None, cols - 1)}"],
                                        int_literal(r), name))
            return [], out
        # flat: element tid + k * threads, its row and column stepped from
        # the thread's first ones (a compare instead of a division per pass)
        for k in range(-(-(rows * cols) // threads)):
            down, right = divmod(k * threads, cols)
            r, c = f"{tag}_r{k}", f"{tag}_c{k}"
            lines = [f"{r} = {plus(f'{tag}_r', down)}", f"{c} = {plus(f'{tag}_c', right)}"]
            if right:
                lines += [f"if {c} >= {int_literal(cols)}:", f"    {c} -= {int_literal(cols)}",
                          f"    {r} += 1"]
            if k * threads + threads > rows * cols:  # the last threads run past the plane
                lines.append(f"{r} = {clamp(r, None, rows - 1)}")
            out.append(Pass(lines, r, c))
        return first, out

    def looped(self, tile: Tile) -> bool:
        """Whether `tile` is staged by a loop (`stage_loops`): a thread
        stages more than `UNROLL_BUDGET` of its elements per step."""
        return tile.planes * tile_passes(tile.rows, tile.cols, self.threads) > UNROLL_BUDGET

    def elements(self, tiles: list[Tile]) -> tuple[list[str], list[Staged]]:
        """Setup lines and the thread's elements of every plane of the
        unrolled `tiles` (a looped tile has none: `stage_loops`)."""
        setup: list[str] = []
        out: list[Staged] = []
        for tile in tiles:
            if self.looped(tile):
                continue
            lines, passes = self.passes(tile)
            setup += lines
            numbered: list[Staged] = []
            for plane in range(tile.planes):
                for ps in passes:
                    placed = Pass(ps.lines, ps.row, ps.col, plane, first=plane == 0)
                    numbered.append((tile, len(numbered), placed))
            out += numbered
        return setup, out

    @staticmethod
    def load(element: Staged, base: str) -> list[str]:
        """An element into a register (`<tag>_v<k>`); `base` is the first
        input channel of the step."""
        tile, k, ps = element
        reads, value = tile.read(ps.plane, ps.row, ps.col, base, f"_{tile.tag}{k}")
        return [*(ps.lines if ps.first else []), *reads, f"{tile.tag}_v{k} = {value}"]

    @staticmethod
    def store(element: Staged, base: str) -> list[str]:
        """The register `load` filled into the shared tile, or the padding
        value where the element is not real."""
        tile, k, ps = element
        terms = tile.valid(ps.plane, ps.row, ps.col, base)
        value = f"{tile.tag}_v{k}"
        if terms:
            value = f"{value} if {' and '.join(terms)} else {tile.pad}"
        row = plus(ps.row, ps.plane * tile.rows)
        index = at(ps.col, row) if tile.transposed else at(row, ps.col)
        return [f"{tile.name}[{index}] = {value}"]

    def stage(self, elements: list[Staged], base: str) -> list[str]:
        """Loads then stores, `STAGE_BATCH` elements at a time: the loads
        of a batch are in flight together."""
        lines: list[str] = []
        for start in range(0, len(elements), STAGE_BATCH):
            batch = elements[start:start + STAGE_BATCH]
            lines += [line for e in batch for line in self.load(e, base)]
            lines += [line for e in batch for line in self.store(e, base)]
        return lines

    def stage_loops(self, tiles: list[Tile], base: str) -> list[str]:
        """The looped `tiles`, each staged by a loop over the thread's
        elements of all its planes (spread flat: consecutive threads on
        consecutive columns), one load and store per iteration."""
        return [line for tile in tiles if self.looped(tile)
                for line in self._stage_loop(tile, base)]

    def _stage_loop(self, tile: Tile, base: str) -> list[str]:
        tag, rows, cols, planes = tile.tag, tile.rows, tile.cols, tile.planes
        total = planes * rows * cols
        e, r, c = f"{tag}_e", f"{tag}_lr", f"{tag}_lc"
        body = [f"{e} = tid + {tag}_k * {int_literal(self.threads)}"]
        q, chan, row = e, base, r
        if planes > 1:
            q, chan = f"{tag}_q", f"({base} + {tag}_pl)"
            row = f"{r} + {tag}_pl * {int_literal(rows)}"
            body += [f"{tag}_pl = {e} // {int_literal(rows * cols)}",
                     f"{q} = {e} % {int_literal(rows * cols)}"]
        reads, value = tile.read(0, r, c, chan, f"_{tag}L")
        terms = tile.valid(0, r, c, chan)
        if terms:
            value = f"{value} if {' and '.join(terms)} else {tile.pad}"
        index = at(c, row) if tile.transposed else at(row, c)
        inner = [f"{r} = {q} // {int_literal(cols)}", f"{c} = {q} % {int_literal(cols)}",
                 *reads, f"{tile.name}[{index}] = {value}"]
        body += guarded([f"{e} < {int_literal(total)}"] if total % self.threads else [], inner)
        steps = -(-total // self.threads)
        return [f"# {tile.name}: {steps} elements per thread, staged in a loop",
                f"for {tag}_k in range({int_literal(steps)}):", *indent(body, 1)]

    def channel_loop(self, tiles: list[Tile], compute: list[str], steps: int, ci_step: int,
                     prefetched: bool) -> list[str]:
        """`steps` steps of `ci_step` input channels around `compute` (which
        reads the tiles from shared memory; `c0` is the step's first
        channel). Pipelined when `prefetched`: the next step is loaded into
        registers before this one is multiplied and stored after it (a
        barrier before and after); otherwise each step is staged, then
        multiplied, between barriers."""
        setup, elements = self.elements(tiles)
        if steps == 1:
            return [*setup, "c0 = 0", *self.stage(elements, "c0"),
                    *self.stage_loops(tiles, "c0"), "cuda.syncthreads()", *compute]
        loop = [f"for s in range({int_literal(steps)}):", f"    c0 = {times('s', ci_step)}"]
        if not prefetched:
            return [*setup, *loop,
                    *indent(["cuda.syncthreads()", *self.stage(elements, "c0"),
                             *self.stage_loops(tiles, "c0"), "cuda.syncthreads()", *compute],
                            1)]
        # a pipelined step holds a few staged elements (PREFETCH_MAX), never a loop's
        assert not any(self.looped(tile) for tile in tiles)
        more = f"s + 1 < {int_literal(steps)}"
        fetch = [f"cn = c0 + {int_literal(ci_step)}"]
        fetch += [line for e in elements for line in self.load(e, "cn")]
        put = [line for e in elements for line in self.store(e, "cn")]
        return [
            *setup,
            "# stage the first channel step",
            "c0 = 0",
            *self.stage(elements, "c0"),
            "cuda.syncthreads()",
            *loop,
            f"    if {more}:  # fetch the next channel step while this one is multiplied",
            *indent(fetch, 2),
            *indent(compute, 1),
            f"    if {more}:",
            *indent(["cuda.syncthreads()", *put, "cuda.syncthreads()"], 2),
        ]
