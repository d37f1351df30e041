"""How the GEMM kernel of `codegen/contraction.py` fetches its operand tiles.

Each K step, the block copies an `A` tile (`BM x BK`, rows m, columns k) and
a `B` tile (`BK x BN`, rows k, columns n) from global memory to registers and
then to shared memory. Each thread fetches the same position of the tile
every step, plus a fixed stride for each further element; consecutive
threads walk along the operand's contiguous dimension so a warp's loads are
coalesced:

- a group input (row-major): along the tile's columns;
- the transpose of a group input over its last two dimensions (`K^T` in
  attention, a transposed weight): along the tile's rows;
- anything else computed by a prologue: along the columns, each element
  evaluated through `operand_reader.read_at`.

```mlir
%kt = nn.transpose %k {perm = [0, 2, 1]} : (tensor<8x64x32xf32>) -> tensor<8x32x64xf32>
%s = nn.matmul %q, %kt : (tensor<8x64x32xf32>, tensor<8x32x64xf32>) -> tensor<8x64x64xf32>
// B tile element (k, n) is read from %k at n * 32 + k, with k fastest
```
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import SSAValue

from fusec.analysis.gemm_operand_mode import operand_mode
from fusec.analysis.group_body import GroupBody
from fusec.codegen.kernel_source import broadcast_index, int_literal
from fusec.codegen.operand_reader import read_at
from fusec.codegen.point_evaluator import indent, load_expr
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import Shape


@dataclass
class OperandTile:
    """The tile of one operand (`p` = "a" or "b") and how it is fetched."""

    p: str
    value: SSAValue  # the matmul operand
    rows: int  # logical operand rows (M for A, K for B)
    cols: int
    tile_rows: int
    tile_cols: int
    threads: int
    row_origin: str  # "m0" / "k0"
    col_origin: str  # "k0" / "n0"

    def __post_init__(self) -> None:
        self.mode, self.source = operand_mode(self.value)
        self.row_fast = self.mode == "transposed"  # contiguous along the tile's rows
        per = self.tile_rows if self.row_fast else self.tile_cols
        assert self.threads % per == 0
        self.loads = self.tile_rows * self.tile_cols // self.threads
        self.step = self.threads // per  # columns (row_fast) or rows between loads

    def setup(self, body: GroupBody, batch: Shape, bcoords: Sequence[str]) -> list[str]:
        """This thread's position in the tile, and its pointer (fixed part)."""
        p = self.p
        fast, slow = (f"{p}_r", f"{p}_c") if self.row_fast else (f"{p}_c", f"{p}_r")
        per = self.tile_rows if self.row_fast else self.tile_cols
        lines = [f"{fast} = tid % {int_literal(per)}", f"{slow} = tid // {int_literal(per)}"]
        if self.mode == "computed":
            return lines
        src_shape = tensor_shape(self.source)
        plane = self.rows * self.cols
        off = f"({broadcast_index(src_shape[:-2], batch, bcoords)}) * {int_literal(plane)}"
        rs, cs = self.strides()
        fixed = f"({self.row_origin} + {p}_r)" if self.row_origin != "k0" else f"{p}_r"
        fixed_c = f"({self.col_origin} + {p}_c)" if self.col_origin != "k0" else f"{p}_c"
        ptr = f"{off} + {fixed} * {int_literal(rs)} + {fixed_c} * {int_literal(cs)}"
        return [*lines, f"{p}_ptr = {ptr}"]

    def strides(self) -> tuple[int, int]:
        """Element strides of the operand's rows and columns in the source."""
        return (1, self.rows) if self.mode == "transposed" else (self.cols, 1)

    def position(self, e: int) -> tuple[str, str]:
        """Tile-relative (row, column) of this thread's element `e`."""
        dr, dc = (0, self.step) if self.row_fast else (self.step, 0)
        return _plus(f"{self.p}_r", e * dr), _plus(f"{self.p}_c", e * dc)

    def load_lines(self, e: int, target: str, guard: str, zero: str, body: GroupBody,
                   bcoords: Sequence[str], batch: Shape) -> list[str]:
        """`target` = element `e` of this K step's tile (zero outside the operand)."""
        r, c = self.position(e)
        row, col = f"{self.row_origin} + {r}", f"{self.col_origin} + {c}"
        if self.mode == "computed":
            return _computed(self, body, target, (row, col), guard, zero, bcoords, batch)
        rs, cs = self.strides()
        k_stride = cs if self.col_origin == "k0" else rs
        dr, dc = (0, self.step) if self.row_fast else (self.step, 0)
        index = f"{self.p}_ptr + k0 * {int_literal(k_stride)}"
        index = _plus(index, e * (dr * rs + dc * cs))
        value = load_expr(body, self.source, index)
        return [f"{target} = {value} if {guard} else {zero}" if guard else f"{target} = {value}"]

    def guard_terms(self, e: int) -> list[tuple[str, int, int]]:
        """(coordinate, size, tile size) of element `e`, for bounds checks."""
        r, c = self.position(e)
        return [(f"{self.row_origin} + {r}", self.rows, self.tile_rows),
                (f"{self.col_origin} + {c}", self.cols, self.tile_cols)]


def _plus(text: str, n: int) -> str:
    return f"{text} + {int_literal(n)}" if n else text


def _computed(
    t: OperandTile,
    body: GroupBody,
    target: str,
    rc: tuple[str, str],
    guard: str,
    zero: str,
    bcoords: Sequence[str],
    batch: Shape,
) -> list[str]:
    """Element of an operand computed by the prologue, evaluated in place."""
    shape = tensor_shape(t.value)
    offset = len(batch) - (len(shape) - 2)
    coords = ["0" if s == 1 else bcoords[d + offset] for d, s in enumerate(shape[:-2])]
    lines = [f"{target}_r = {rc[0]}", f"{target}_c = {rc[1]}"]
    reads, value = read_at(body, t.value, [*coords, f"{target}_r", f"{target}_c"], f"_{target}")
    inner = [*reads, f"{target} = {value}"]
    if not guard:
        return lines + inner
    return [*lines, f"{target} = {zero}", f"if {guard}:", *indent(inner, 1)]
