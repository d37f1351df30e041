"""Staging a depthwise or pool halo tile in words of `lanes` consecutive
input elements (`scheduling/window_stage_lanes.py` chooses `lanes`), for
`codegen/window_tiled.py`.

A block's tile row `r` is input row `ih0 + r` (clamped into the image),
columns `iw0 ..` of channel `xch`. The threads take the row's words in
order (consecutive threads, consecutive words: coalesced), each word at an
element index that is a multiple of `lanes`, so it is aligned once the
array is. A block takes this path when its arrays are aligned
(`is_aligned`) and every word of its tile lies inside the array (the
blocks at the array's first and last rows may not); otherwise it loads the
same words' lanes one by one, each where it is stored (`scalar`): an
element-by-element staging of the tile beside the words would hold more
registers, and ptxas gives every block what either branch holds. Lane
`j` of the word that starts `a` elements before the row's first staged
column is tile column `k * lanes + j - a`:

```python
xq_s0 = (o0 * 8 + xch) * 4096 + xq_h0 * 64 + iw0   # the row's first column
xq_a0 = xq_s0 % 4                                  # its place in a word
xq_g0 = xq_s0 - xq_a0 + xq_c * 4                   # this word's first element
xq_t0 = xq_c * 4 - xq_a0                           # ... as a tile column
xq_w0_0 = ld_vec4_f32(in0, numba.uint64(xq_g0))
if 0 <= xq_t0 < 70:
    xs[numba.uint64(xq_r), numba.uint64(xq_t0)] = xq_w0_0[0] if ... else float32(0.0)
```

A lane outside the tile stores nothing; one outside the image (padding, or
the next row's first elements when a word straddles two rows) stores the
padding value. A prologue (`operand_reader`) is evaluated once per stored
element, its inputs of the operand's shape read from the words' lanes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from xdsl.ir import BlockArgument

from fusec.analysis.group_body import GroupBody, dtype_name
from fusec.codegen.kernel_source import int_literal
from fusec.codegen.operand_reader import read_at
from fusec.codegen.point_evaluator import indent, load_expr
from fusec.codegen.wide_access import WORD_TYPES, alignment_tests, lane_value, wide_load
from fusec.codegen.window_staging import Stager, Tile, at, clamp, plus
from fusec.dialects.element_types import of_device_dtype
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import numel
from fusec.scheduling.flat_vector import lane_choices
from fusec.scheduling.window_plan import TiledWindow
from fusec.scheduling.window_shape import WindowShape
from fusec.scheduling.window_stage_lanes import WIDE_BATCH, words_per_row


@dataclass
class WideHalo:
    """Writes the staging of a one-channel halo tile `xs` in words of
    `lanes` elements; `wide` collects the group inputs read as words (by
    number) as the lanes are written."""

    w: WindowShape
    tiled: TiledWindow
    lanes: int
    pad: str
    wide: dict[int, str] = field(default_factory=dict[int, str])  # input -> device dtype
    # the same words' lanes loaded one by one, each where it is stored: the
    # branch of the blocks whose words may not be read (`lone_lines`)
    scalar: bool = False

    def _eligible(self, v: BlockArgument, cs: tuple[str, ...], coords: tuple[str, ...]) -> bool:
        """Whether input `v` read at `cs` is the staged element itself (an
        input of the window operand's shape at the element's coordinates)."""
        shape = tensor_shape(v)
        if shape != tuple(self.w.in_shape) or len(cs) != len(shape):
            return False
        same = all(a == b or n == 1 for a, b, n in zip(cs, coords, shape, strict=True))
        return same and self.lanes in lane_choices(dtype_name(v))

    def _lane(self, body: GroupBody, v: BlockArgument, word: str, j: int) -> str:
        i = body.arg_index(v)
        dtype = dtype_name(v)
        self.wide[i] = dtype
        if self.scalar:
            index = plus(self._word_index(word), j)
            return load_expr(body, v, at(clamp(index, 0, numel(self.w.in_shape) - 1)))
        if dtype == "float32":
            return f"{word}_{i}[{j}]"
        return lane_value(of_device_dtype(dtype).name, WORD_TYPES[self.lanes], f"{word}_{i}", j)

    def _word_index(self, word: str) -> str:
        """The first element of word `xq_w<k>`."""
        return word.replace("xq_w", "xq_g")

    def lone_lines(self, body: GroupBody, stager: Stager) -> list[str] | None:
        """`lines` with each lane loaded on its own where it is stored: the
        blocks whose words may not be read. Few registers: an
        element-by-element staging of the tile beside the words would hold
        more, and ptxas gives every block what either branch holds."""
        lone = replace(self, wide={}, scalar=True)
        return lone.lines(body, stager)

    def _word_lines(self, word: str, index: str) -> list[str]:
        """The words `<word>_<input>` at element `index`, one per wide input
        (none when `scalar`)."""
        if self.scalar:
            return []
        lines: list[str] = []
        for i, dtype in self.wide.items():
            at_g = f"numba.uint64({index})"
            wide = (f"ld_vec4_f32(in{i}, {at_g})" if dtype == "float32"
                    else wide_load(WORD_TYPES[self.lanes], f"in{i}", at_g))
            lines.append(f"{word}_{i} = {wide}")
        return lines

    def lines(self, body: GroupBody, stager: Stager) -> list[str] | None:
        """The staging of the tile (under the alignment test `test`), or
        None when no input is read as words (a prologue that transposes)."""
        g, t, lanes = self.tiled.geo, self.tiled, self.lanes
        rows, cols = t.halo
        row_check, _ = t.halo_checks
        wpr = words_per_row(cols, lanes)
        shape = Tile("xs", "xq", rows, wpr, _no_read, _no_valid, self.pad)
        setup, passes = stager.passes(shape)
        plane = f"(o0 * {int_literal(g.c_in)} + xch) * {int_literal(g.h * g.w)}"
        out = [*setup]
        for start in range(0, len(passes), WIDE_BATCH):
            index: list[str] = []
            stores: list[str] = []
            for k in range(start, min(start + WIDE_BATCH, len(passes))):
                ps = passes[k]
                ih = f"ih0 + {ps.row}"
                index += [*ps.lines,
                          f"xq_h{k} = {clamp(ih, 0, g.h - 1) if row_check else ih}",
                          f"xq_s{k} = {plane} + xq_h{k} * {int_literal(g.w)} + iw0",
                          f"xq_a{k} = xq_s{k} % {int_literal(lanes)}",
                          f"xq_g{k} = xq_s{k} - xq_a{k} + {ps.col} * {int_literal(lanes)}",
                          f"xq_t{k} = {ps.col} * {int_literal(lanes)} - xq_a{k}"]
                for j in range(lanes):
                    stores += self._lane_store(body, k, j, ps.row, cols, row_check)
            if not self.wide:
                return None
            out += index
            out += [line for k in range(start, min(start + WIDE_BATCH, len(passes)))
                    for line in self._word_lines(f"xq_w{k}", f"xq_g{k}")]
            out += stores
        return out

    def test(self) -> tuple[list[str], str]:
        """Lines and the test under which the words can be read: the wide
        inputs' arrays aligned, and every word of the block's tile inside
        the array (the first word of its first row starts at or after
        element 0, the last of its last row ends by the array's end)."""
        g, lanes = self.tiled.geo, self.lanes
        rows, cols = self.tiled.halo
        row_check, _ = self.tiled.halo_checks
        plane = f"(o0 * {int_literal(g.c_in)} + xch) * {int_literal(g.h * g.w)}"
        last = f"ih0 + {int_literal(rows - 1)}"
        lines = [f"xq_lo = {plane} + {clamp('ih0', 0, g.h - 1) if row_check else 'ih0'} * "
                 f"{int_literal(g.w)} + iw0",
                 f"xq_hi = {plane} + {clamp(last, 0, g.h - 1) if row_check else last} * "
                 f"{int_literal(g.w)} + iw0 + {int_literal(words_per_row(cols, lanes) * lanes)}"]
        aligned = alignment_tests((f"in{i}", lanes * of_device_dtype(d).width)
                                  for i, d in sorted(self.wide.items()))
        bounds = f"xq_lo >= 0 and xq_hi <= {int_literal(numel(self.w.in_shape))}"
        return lines, " and ".join([*aligned, bounds])

    def _lane_store(self, body: GroupBody, k: int, j: int, row: str, cols: int,
                    row_check: bool) -> list[str]:
        """Lane `j` of pass `k`: its element evaluated and stored when it is
        a column of the tile."""
        g, x = self.tiled.geo, self.w.x
        col = plus(f"xq_t{k}", j)
        word = f"xq_w{k}"
        if isinstance(x, BlockArgument):
            reads, value = [], self._lane(body, x, word, j)
        else:
            xw = f"xq_x{k}_{j}"
            coords = ("o0", "xch", f"xq_h{k}", xw)

            def loader(v: BlockArgument, cs: tuple[str, ...]) -> str | None:
                return self._lane(body, v, word, j) if self._eligible(v, cs, coords) else None

            reads, value = read_at(body, x, list(coords), f"_xq{k}_{j}", loader)
            if any(xw in line for line in reads):  # an input broadcast along H reads it
                reads = [f"{xw} = {clamp(f'iw0 + {col}', 0, g.w - 1)}", *reads]
        terms = [f"0 <= iw0 + {col} < {int_literal(g.w)}"]
        if row_check:
            terms.insert(0, f"0 <= ih0 + {row} < {int_literal(g.h)}")
        stored = f"{value} if {' and '.join(terms)} else {self.pad}"
        return [f"if 0 <= {col} < {int_literal(cols)}:",
                *indent([*reads, f"xs[{at(row, col)}] = {stored}"], 1)]


def _no_read(plane: int, row: str, col: str, base: str, suffix: str) -> tuple[list[str], str]:
    raise AssertionError("a word tile's positions are only placed, never read")


def _no_valid(plane: int, row: str, col: str, base: str) -> list[str]:
    raise AssertionError("a word tile's positions are only placed, never read")
