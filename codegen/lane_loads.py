"""The loads and stores of one vector access of the flat schedule
(`scheduling/flat_vector.py`): `lanes` consecutive elements along the
innermost axis, each lane's code written as for one element
(`pointwise_transpose._element`, at the lane's coordinates), its loads made
through `LaneLoads.load`.

An array the plan reads wide is read the same way by every lane, in the
same order, one element further per lane: the `k`-th load of array `X` by
lane `j` is element `j` of the `k`-th load by lane 0. So lane 0's `k`-th
load names a word (`w<X>_<access>_<k>`) loaded once at lane 0's index, and
every lane reads its element of that word (`wide_access.py`); the word's
load is placed just before the first line of lane 0 that uses it (after the
index arithmetic it needs). Other arrays are loaded per lane.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.ir import BlockArgument, SSAValue

from fusec.analysis.group_body import GroupBody, dtype_name
from fusec.codegen.point_evaluator import load_expr
from fusec.codegen.wide_access import WORD_TYPES, lane_value, pack_values, wide_load, wide_store
from fusec.dialects.element_types import of_device_dtype


@dataclass
class LaneLoads:
    """The loads of one access: `wide` holds the group inputs (by number)
    loaded as words of `lanes` elements; `tag` keeps the words of several
    accesses apart. `start(j)` before writing lane `j`'s code."""

    lanes: int
    wide: frozenset[int]
    tag: str
    lane: int = 0
    words: dict[str, str] = field(default_factory=dict[str, str])
    _count: dict[int, int] = field(default_factory=dict[int, int])

    def start(self, lane: int) -> None:
        """Write lane `lane`'s loads next."""
        self.lane, self._count = lane, {}

    def load(self, body: GroupBody, arg: BlockArgument, index: str) -> str:
        """The element at `index` of group input `arg` for the current lane."""
        i = body.arg_index(arg)
        if i not in self.wide:
            return load_expr(body, arg, index)
        k = self._count.get(i, 0)
        self._count[i] = k + 1
        word = f"w{i}{self.tag}_{k}"
        dtype = dtype_name(arg)
        if self.lane == 0:
            self.words[word] = (f"ld_vec4_f32(in{i}, {index})" if dtype == "float32" else
                                wide_load(WORD_TYPES[self.lanes], f"in{i}", index))
        if dtype == "float32":
            return f"{word}[{self.lane}]"
        return lane_value(of_device_dtype(dtype).name, WORD_TYPES[self.lanes], word, self.lane)

    def place_words(self, lines: Sequence[str]) -> list[str]:
        """Lane 0's `lines` with each word's load inserted before the first
        line that reads it (indented as that line)."""
        pending = dict(self.words)
        out: list[str] = []
        for line in lines:
            for word in [w for w in pending if re.search(rf"\b{w}\b", line)]:
                pad = line[:len(line) - len(line.lstrip())]
                out.append(f"{pad}{word} = {pending.pop(word)}")
            out.append(line)
        assert not pending, f"wide loads no lane-0 line reads: {sorted(pending)}"
        return out


def wide_store_line(k: int, value: SSAValue, index: str, lanes: Sequence[str]) -> str:
    """The statement storing the lanes' values of result `value` (output
    `k`) as one word at element `index`."""
    dtype = dtype_name(value)
    if dtype == "float32":  # 4 floats, or a whole row of 2 (`scheduling/concat_rows.py`)
        return f"st_vec{len(lanes)}_f32(out{k}, {index}, {', '.join(lanes)})"
    word_type = WORD_TYPES[len(lanes)]
    return wide_store(word_type, f"out{k}", index,
                      pack_values(of_device_dtype(dtype).name, word_type, list(lanes)))

