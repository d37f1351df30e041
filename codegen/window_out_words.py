"""The stores of a one-across depthwise or pool block's outputs in words
(`scheduling/window_stage_lanes.py`: `out_lanes`), for
`codegen/window_tiled.py`.

A thread owns `pt` rows of one output column, so its own stores go down a
column: a warp's scalar stores of a narrow bf16 output (4 columns) cover
half of each 8-byte output row per instruction. A block as wide as the
output instead writes its results into its halo tile (free once every
thread has read its taps), then stores the tile's `th x ow` outputs, one
contiguous run of the output, in words of `lanes` (consecutive threads,
consecutive words, each at an element index that is a multiple of `lanes`).
Lane `j` of word `q` is run element `e = q * lanes + j - a` (`a` the run's
place in its first word), tile row `e // ow`, column `e % ow`. A word that
lies wholly in the run is one wide store; the words at the run's ends,
which share elements with the neighbouring blocks' runs, store their own
lanes one by one:

```python
cuda.syncthreads()                     # every tap read
if tid < 120:
    xs[numba.uint64(r0), numba.uint64(col)] = yo2_0
    ...
cuda.syncthreads()
ys = (o0 * 757 + o1) * 1140 + oh0 * 15  # the run's first element
yn = min(16, 76 - oh0) * 15             # its length (the last tile's is shorter)
ya = ys % 8                             # its place in a word
yq0 = tid
ye0 = yq0 * 8 - ya                      # lane 0 of the word, in the run
if ye0 < yn:
    yr0 = ye0 // 15                     # ... a tile row and column (floored)
    yc0 = ye0 - yr0 * 15
    yv0_0 = xs[numba.uint64(yr0), numba.uint64(yc0)] if 0 <= ye0 < yn else float32(0.0)
    yc0 += 1                            # lane 1: stepped from lane 0
    if yc0 >= 15:
        yc0 = 0
        yr0 += 1
    yv0_1 = xs[numba.uint64(yr0), numba.uint64(yc0)] if 0 <= ye0 + 1 < yn else float32(0.0)
    ...
    if ye0 >= 0 and ye0 + 8 <= yn:
        st_vec4_u32(out0, numba.uint64(ys - ya + yq0 * 8), bf16x2_bits(yv0_0, yv0_1), ...)
    else:
        if 0 <= ye0 < yn:
            out0[numba.uint64(ys - ya + yq0 * 8)] = f32_to_bf16(yv0_0)
        ...
```

Planes and tiles of whole words start every run at a word, so every word
is whole (and stored without a test); rows of whole words (`ow` a multiple of
`lanes`) or whole rows per word (`lanes` a multiple of `ow`) then place a
word's lanes at constant offsets from its first.
"""

from __future__ import annotations

from fusec.codegen.kernel_source import int_literal, narrow
from fusec.codegen.point_evaluator import indent
from fusec.codegen.wide_access import WORD_TYPES, alignment_tests, pack_values, wide_store
from fusec.codegen.window_staging import at, plus
from fusec.dialects.element_types import of_device_dtype
from fusec.scheduling.window_plan import TiledWindow
from fusec.scheduling.window_stage_lanes import words_per_row


def out_word_lines(tiled: TiledWindow, k: int, dtype: str, lanes: int, zero: str,
                   ) -> list[str]:
    """Output `k` (device dtype `dtype`), already in the halo tile `xs`,
    stored by every thread of the block in words of `lanes` (`zero`: the
    tile type's zero literal)."""
    return _OutRun(tiled, k, dtype, lanes, zero).lines()


class _OutRun:
    def __init__(self, tiled: TiledWindow, k: int, dtype: str, lanes: int, zero: str) -> None:
        self.t, self.g, self.k, self.dtype, self.lanes = tiled, tiled.geo, k, dtype, lanes
        self.zero = zero
        g, th = self.g, tiled.plan.th
        # every run starts a word (planes and tiles of whole words), so every
        # word is whole: in one row (rows of whole words), or over whole rows
        self.aligned = (g.oh * g.ow) % lanes == 0 and (th * g.ow) % lanes == 0
        self.rows_whole = g.ow % lanes == 0
        whole_rows = self.aligned and lanes % g.ow == 0 and not self.rows_whole
        self.rows_per_word = lanes // g.ow if whole_rows else 0

    def lines(self) -> list[str]:
        g, p, lanes, k = self.g, self.t.plan, self.lanes, self.k
        threads = self.t.threads
        run = p.th * g.ow
        n = (f"min({int_literal(p.th)}, {int_literal(g.oh)} - oh0) * {int_literal(g.ow)}"
             if g.oh % p.th else int_literal(run))
        width = lanes * of_device_dtype(self.dtype).width
        self.tests = alignment_tests([(f"out{k}", width)])
        out = [f"# the block's outputs: {lanes}-element words of its contiguous rows",
               *(["yw_ok = " + " and ".join(self.tests)] if self.tests else []),
               f"ys = (o0 * {int_literal(g.c_out)} + o1) * {int_literal(g.oh * g.ow)} + "
               f"oh0 * {int_literal(g.ow)}"]
        if n != int_literal(run):
            out.append(f"yn = {n}")
            n = "yn"
        if self.aligned:
            words = run // lanes
        else:
            out.append(f"ya = ys % {int_literal(lanes)}")
            words = words_per_row(run, lanes)
        for m in range(-(-words // threads)):
            out += self._word(m, threads, n, words)
        return out

    def _word(self, m: int, threads: int, n: str, words: int) -> list[str]:
        g, lanes, k = self.g, self.lanes, self.k
        q, e = f"yq{m}", f"ye{m}"
        first = [f"{q} = {plus('tid', m * threads)}",
                 f"{e} = {q} * {int_literal(lanes)}" + ("" if self.aligned else " - ya")]
        if self.rows_whole or self.rows_per_word:
            reads: list[str] = []
            values = [f"xs[{at(r, c)}]" for r, c in self._places(m)]
        else:
            reads, values = self._lane_reads(m, n)
        index = f"ys + {e}" if self.aligned else f"ys - ya + {q} * {int_literal(lanes)}"
        wide = _word_store(k, self.dtype, lanes, index, values)
        scalar: list[str] = []
        for j, v in enumerate(values):
            lane = plus(e, j)
            store = f"out{k}[{at(plus(index, j))}] = {narrow(self.dtype, v)}"
            scalar += [f"if 0 <= {lane} < {n}:", f"    {store}"]
        tests = ["yw_ok"] if self.tests else []
        if not self.aligned:  # whole words end the run at a word; others may not
            tests += [f"{e} >= 0", f"{e} + {int_literal(lanes)} <= {n}"]
        body = [*self._place_lines(m), *reads, f"if {' and '.join(tests)}:", f"    {wide}",
                "else:", *indent(scalar, 1)] if tests else [*self._place_lines(m), *reads, wide]
        # the last pass's threads past the words, and words past a short run
        bounded = n != int_literal(self.t.plan.th * g.ow) or (m + 1) * threads > words
        guard = f"if {e} < {n}:"
        return [*first, *([guard, *indent(body, 1)] if bounded else body)]

    def _places(self, m: int) -> list[tuple[str, str]]:
        """Tile row and column of each lane of word `m`."""
        lanes, ow = self.lanes, self.g.ow
        if self.rows_whole:
            col = "yc" + str(m) if ow > lanes else None
            return [(f"yr{m}", plus(col, j) if col else int_literal(j)) for j in range(lanes)]
        if self.rows_per_word:  # lane j in the word's row j // ow, column j % ow
            return [(plus(f"yr{m}", j // ow), int_literal(j % ow)) for j in range(lanes)]
        raise AssertionError("these lanes are read as they are placed (`_lane_reads`)")

    def _lane_reads(self, m: int, n: str) -> tuple[list[str], list[str]]:
        """Word `m` of a run whose words straddle rows unevenly: each lane
        read from the tile as it is placed, stepped from the lane before
        (one row and column live, not one per lane), a lane outside the run
        (an unaligned run's end words) read as nothing."""
        ow = int_literal(self.g.ow)
        r, c, e = f"yr{m}", f"yc{m}", f"ye{m}"
        lines: list[str] = []
        values: list[str] = []
        for j in range(self.lanes):
            if j:
                lines += [f"{c} += 1", f"if {c} >= {ow}:", f"    {c} = 0", f"    {r} += 1"]
            v = f"yv{m}_{j}"
            read = f"xs[{at(r, c)}]"
            if not self.aligned:
                read = f"{read} if 0 <= {plus(e, j)} < {n} else {self.zero}"
            lines.append(f"{v} = {read}")
            values.append(v)
        return lines, values

    def _place_lines(self, m: int) -> list[str]:
        g, lanes = self.g, self.lanes
        ow = int_literal(g.ow)
        e = f"ye{m}"
        if self.rows_per_word:
            return [f"yr{m} = yq{m} * {int_literal(self.rows_per_word)}"]
        if self.rows_whole:
            if g.ow == lanes:
                return [f"yr{m} = yq{m}"]
            per_row = int_literal(g.ow // lanes)
            return [f"yr{m} = yq{m} // {per_row}",
                    f"yc{m} = (yq{m} % {per_row}) * {int_literal(lanes)}"]
        return [f"yr{m} = {e} // {ow}", f"yc{m} = {e} - yr{m} * {ow}"]  # floored


def _word_store(k: int, dtype: str, lanes: int, index: str, values: list[str]) -> str:
    at_i = f"numba.uint64({index})"
    if dtype == "float32":
        return f"st_vec4_f32(out{k}, {at_i}, {', '.join(values)})"
    word_type = WORD_TYPES[lanes]
    word = pack_values(of_device_dtype(dtype).name, word_type, values)
    return wide_store(word_type, f"out{k}", at_i, word)
