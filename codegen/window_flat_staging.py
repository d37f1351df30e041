"""Staging a one-across depthwise or pool halo tile as one flat run of
words (`scheduling/window_stage_lanes.py`: `flat_lanes`), for
`codegen/window_tiled.py`.

A block whose tile is as wide as the output stages tile rows `ih0 ..` of
channel `xch`, every column of the image between the padding columns (the
tile's column `c + pl` is image column `c`, `pl` the left padding). Those
elements are one contiguous run of the input's memory, `rows x W` elements
from the first row's first element; the threads take its words in order
(consecutive threads, consecutive 16-byte words), each at an element index
that is a multiple of `lanes`. Lane `j` of word `q` is run element
`f = q * lanes + j - a` (`a` the run's place in its first word), tile
row `f // W`, column `f % W + pl`:

```python
xf_s = (o0 * 3 + xch) * 143 + ih0 * 13        # the run's first element
xf_a = xf_s % 8                               # its place in a word
xf_lo = xf_s - xf_a
xf_q0 = tid                                   # the thread's word
xf_e0 = xf_q0 * 8 - xf_a                      # its lane 0 in the run,
xf_r0 = xf_e0 // 13                           # ... a tile row and image column
xf_c0 = xf_e0 - xf_r0 * 13
xf_w0_0 = ld_vec4_u32(in0, numba.uint64(xf_lo + min(xf_q0, 22) * 8))
xf_f0_1 = xf_e0 + 1                           # lane 1: stepped from lane 0
if 0 <= xf_f0_1 < 169:
    xf_c0_1 = xf_c0 + 1
    xf_r0_1 = xf_r0
    if xf_c0_1 >= 13:
        xf_c0_1 -= 13
        xf_r0_1 += 1
    xs[numba.uint64(xf_r0_1), numba.uint64(xf_c0_1 + 1)] = f16_from_bits(...) if ...
```

Threads past the run's last word load it too (its load in flight with the
others) and store nothing, their lanes lying past the run. Rows of whole
words (W a multiple of `lanes`) start every run at a word, so a word's row
and first column are computed once and no lane is tested; a row narrower
than a word places each lane by a division.

A row outside the image (padding, or the tile's last rows past the image's
end) stores the padding value, as do the padding columns, stored without
loads. The words are read when the arrays are aligned and every word lies
inside the array; the other blocks (at the array's first and last rows, or
all of an unaligned view's) load the same run's lanes one by one, each
where it is stored (`scalar`): the element-by-element staging of the tile
would hold more registers (a 5x5 depthwise conv in bf16 under a silu: 96
to the words' 61), and ptxas gives every block what either branch holds.
A prologue (`operand_reader`) is evaluated once per stored element, its
inputs of the operand's shape read from the words' lanes.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import BlockArgument

from fusec.analysis.group_body import GroupBody
from fusec.codegen.kernel_source import int_literal
from fusec.codegen.operand_reader import read_at
from fusec.codegen.point_evaluator import indent
from fusec.codegen.wide_access import alignment_tests
from fusec.codegen.window_staging import Stager, Tile, at, clamp, plus
from fusec.codegen.window_wide_staging import WideHalo
from fusec.dialects.element_types import of_device_dtype
from fusec.dialects.shapes import numel
from fusec.scheduling.window_stage_lanes import WIDE_BATCH, flat_words, pad_columns


@dataclass
class FlatHalo(WideHalo):
    """Writes the flat staging of a one-channel, one-across halo tile `xs`
    in words of `lanes` elements (the word reading of `WideHalo`; its
    `lone_lines` load the same run's lanes one by one)."""

    def _word_index(self, word: str) -> str:
        """The first element of word `xf_w<k>`."""
        return f"xf_lo + xf_q{word.removeprefix('xf_w')} * {int_literal(self.lanes)}"

    def _loads(self, k: int, words: int) -> list[str]:
        """Word `k` of each input read as words (none when `scalar`)."""
        q = self._clamped_q(k, words)
        return self._word_lines(f"xf_w{k}", f"xf_lo + {q} * {int_literal(self.lanes)}")

    def _plane(self) -> str:
        g = self.tiled.geo
        return f"(o0 * {int_literal(g.c_in)} + xch) * {int_literal(g.h * g.w)}"

    def test(self) -> tuple[list[str], str]:
        """Lines and the test under which the words can be read: the wide
        inputs' arrays aligned, and every word of the run inside the array."""
        g, lanes = self.tiled.geo, self.lanes
        if self._aligned_rows():  # the run starts a word
            lines = [f"xf_lo = {self._plane()} + ih0 * {int_literal(g.w)}"]
        else:
            lines = [f"xf_s = {self._plane()} + ih0 * {int_literal(g.w)}",
                     f"xf_a = xf_s % {int_literal(lanes)}",
                     "xf_lo = xf_s - xf_a"]
        end = f"xf_lo + {int_literal(flat_words(self.tiled, lanes) * lanes)}"
        aligned = alignment_tests((f"in{i}", lanes * of_device_dtype(d).width)
                                  for i, d in sorted(self.wide.items()))
        bounds = f"xf_lo >= 0 and {end} <= {int_literal(numel(self.w.in_shape))}"
        return lines, " and ".join([*aligned, bounds])

    def lines(self, body: GroupBody, stager: Stager) -> list[str] | None:
        """The staging of the tile (under `test`), or None when no input is
        read as words (a prologue that transposes)."""
        lanes, threads = self.lanes, self.tiled.threads
        words = flat_words(self.tiled, lanes)
        passes = -(-words // threads)
        out: list[str] = []
        step = 1 if self.scalar else WIDE_BATCH  # a word's lanes at a time, or whole words
        for start in range(0, passes, step):
            batch = range(start, min(start + step, passes))
            index: list[str] = []
            stores: list[str] = []
            for k in batch:
                index.append(f"xf_q{k} = {plus('tid', k * threads)}")
                # the last threads past the run load its last word (in flight with
                # the others) and store nothing: their lanes lie past the run
                partial = (k + 1) * threads > words
                if self._aligned_rows():
                    index += self._word_place(k)
                else:
                    index.append(f"xf_e{k} = xf_q{k} * {int_literal(lanes)} - xf_a")
                    if self._stepped():  # lane 0's place (floored: it may precede the run)
                        w = int_literal(self.tiled.geo.w)
                        index += [f"xf_r{k} = xf_e{k} // {w}", f"xf_c{k} = xf_e{k} - xf_r{k} * {w}"]
                word = [line for j in range(lanes) for line in self._flat_store(body, k, j)]
                if partial and self._aligned_rows():  # an unaligned lane tests its place
                    word = [f"if xf_q{k} < {int_literal(words)}:", *indent(word, 1)]
                stores += word
            if not self.wide:
                return None
            # the words are listed once the lanes named the wide inputs
            loads = [line for k in batch for line in self._loads(k, words)]
            out += [*index, *loads, *stores]
        return out

    def _clamped_q(self, k: int, words: int) -> str:
        """Word `k`'s number, clamped to the run's last word where threads
        pass it."""
        if (k + 1) * self.tiled.threads > words:
            return clamp(f"xf_q{k}", None, words - 1)
        return f"xf_q{k}"

    def _aligned_rows(self) -> bool:
        """Whether every run starts a word and every word lies in one image
        row (a multiple of `lanes` columns, planes too): a word's row and
        first column are computed once, and no lane needs a test."""
        g = self.tiled.geo
        return g.w % self.lanes == 0

    def _word_place(self, k: int) -> list[str]:
        """Word `k`'s row and first column when `_aligned_rows`."""
        per_row = self.tiled.geo.w // self.lanes
        if per_row == 1:  # a word per row
            return [f"xf_r{k} = xf_q{k}"]
        return [f"xf_r{k} = xf_q{k} // {int_literal(per_row)}",
                f"xf_c{k} = (xf_q{k} % {int_literal(per_row)}) * {int_literal(self.lanes)}"]

    def _flat_store(self, body: GroupBody, k: int, j: int) -> list[str]:
        """Lane `j` of word `k`: its element evaluated and stored when it
        lies in the run (and in the tile's columns)."""
        t, g, x = self.tiled, self.tiled.geo, self.w.x
        rows, cols = t.halo
        row_check, _ = t.halo_checks
        left, _ = pad_columns(t)
        word = f"xf_w{k}"
        if self._aligned_rows():
            c = int_literal(j) if g.w == self.lanes else plus(f"xf_c{k}", j)
            f, r = "", f"xf_r{k}"
        else:
            f, r, c = f"xf_f{k}_{j}", f"xf_r{k}_{j}", f"xf_c{k}_{j}"
        if isinstance(x, BlockArgument):
            reads, value = [], self._lane(body, x, word, j)
        else:
            h, w = f"xf_h{k}_{j}", f"xf_x{k}_{j}"
            coords = ("o0", "xch", h, w)

            def loader(v: BlockArgument, cs: tuple[str, ...]) -> str | None:
                return self._lane(body, v, word, j) if self._eligible(v, cs, coords) else None

            reads, value = read_at(body, x, list(coords), f"_xf{k}_{j}", loader)
            # an input read at the element's own row or column (not from the words)
            if any(w in line for line in reads):
                reads = [f"{w} = {c}", *reads]
            if any(h in line for line in reads):
                ih = f"ih0 + {r}"
                reads = [f"{h} = {clamp(ih, 0, g.h - 1) if row_check else ih}", *reads]
        if row_check:
            value = f"{value} if 0 <= ih0 + {r} < {int_literal(g.h)} else {self.pad}"
        store = [*reads, f"xs[{at(r, _shifted(c, left))}] = {value}"]
        if left + g.w > cols:  # image columns past the tile's last
            store = [f"if {c} < {int_literal(cols - left)}:", *indent(store, 1)]
        if not f:
            return store
        if not self._stepped():
            placed = [f"{r} = {f} // {int_literal(g.w)}", f"{c} = {f} % {int_literal(g.w)}"]
        else:  # stepped from lane 0's place: a word spans two rows at most
            placed = [f"{c} = {plus(f'xf_c{k}', j)}", f"{r} = xf_r{k}"]
            if j:
                placed += [f"if {c} >= {int_literal(g.w)}:", f"    {c} -= {int_literal(g.w)}",
                           f"    {r} += 1"]
        return [f"{f} = {plus(f'xf_e{k}', j)}",
                f"if 0 <= {f} < {int_literal(rows * g.w)}:", *indent([*placed, *store], 1)]

    def _stepped(self) -> bool:
        """Whether an unaligned word's lanes are placed by stepping from its
        lane 0 (one division per word, not per lane): a row holds a word."""
        return self.tiled.geo.w >= self.lanes

    def pad_columns(self, stager: Stager) -> list[str]:
        """The padding columns left and right of the image, every row."""
        t, g = self.tiled, self.tiled.geo
        rows, _ = t.halo
        left, right = pad_columns(t)
        if not left + right:
            return []
        tile = Tile("xs", "xp", rows, left + right, _no_read, _no_valid, self.pad)
        setup, passes = stager.passes(tile)
        out = ["# the padding columns", *setup]
        for ps in passes:
            col = ps.col
            if left and right:
                col = f"{ps.col} + ({int_literal(g.w)} if {ps.col} >= {int_literal(left)} else 0)"
            elif right:
                col = f"{ps.col} + {int_literal(left + g.w)}"
            out += [*ps.lines, f"xs[{at(ps.row, col)}] = {self.pad}"]
        return out


def _shifted(col: str, by: int) -> str:
    """`col + by`, a literal when `col` is one, the literals of `x + k`
    added."""
    if col.isdigit():
        return int_literal(int(col) + by)
    head, _, tail = col.rpartition(" + ")
    if head and tail.isdigit():
        return plus(head, int(tail) + by)
    return plus(col, by)


def _no_read(plane: int, row: str, col: str, base: str, suffix: str) -> tuple[list[str], str]:
    raise AssertionError("a flat tile's positions are only placed, never read")


def _no_valid(plane: int, row: str, col: str, base: str) -> list[str]:
    raise AssertionError("a flat tile's positions are only placed, never read")
