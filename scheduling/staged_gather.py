"""A gather along a table's innermost axis, staged by rows (`StagedGather`).

`nn.gather %table, %ids {axis = rank - 1}` picks, in every row of the
table, the elements the ids name: `out[r, j] = table[r, ids[j]]` (`r` the
table's outer coordinates, `j` the ids'). Read in place on the flat
schedule, each output element is one random element of its row: a 32-byte
sector moved (from L2 at best) for 2 or 4 bytes used, and a program that
gathers most columns of a wide table moved 8 to 16 times its bytes
(`gather_columns` of the data-movement corpus ran at 20% of the copy floor
on an H100, 2026-12-06).

Staged, a block copies its table row into shared memory in 16-byte words
(coalesced, the row read once) and then writes the row's outputs in order,
each gathered from shared memory (`codegen/gather_rows.py`). That pays when
the row's bytes are fewer than the sectors the random reads would move
(`PAYS_SECTOR_BYTES` per id), and fits when the row fits a block's shared
memory (dynamic, past 48 KiB with the runtime's opt-in). Where the table
has fewer rows than the GPU holds blocks at once (as many as fit an SM's
shared memory, `MAX_RESIDENT` at most, per SM), each row's outputs are
split over `parts` blocks (each stages the whole row again, mostly from L2):
at least one full wave, at most twice that, the count whose last wave is
fullest (the fewest among equals), and never so many that a block writes
fewer bytes than it stages.

The schedule records the choice: `#fusion.pointwise<..., gather_parts = P>`
(0: not staged).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import BlockArgument, Operation

from fusec.analysis.group_body import dtype_name
from fusec.analysis.targets import Target
from fusec.dialects import nn
from fusec.dialects.element_types import of_device_dtype
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import numel

PAYS_SECTOR_BYTES = 16
"""Bytes an in-place read of one random element is counted to move: half a
32-byte sector (neighbouring ids of a row sometimes share one). Staging
pays when a row has fewer bytes than its ids times this."""
WORD_BYTES = 16
"""Bytes per staging load."""
WORD_DTYPES = ("float32", "uint16")
"""Device dtypes staged in 16-byte words (f32, bf16 bits); the others in
`STAGED_DTYPES` element by element."""
STAGED_DTYPES = (*WORD_DTYPES, "float64", "int32", "int64")
"""Device dtypes a staged row may hold (numba has no f16 shared array here)."""


@dataclass(frozen=True)
class StagedGather:
    """The gather a pointwise group stages by rows, and its sizes."""

    op: nn.GatherOp
    table: BlockArgument
    rows: int
    """Rows of the table (the product of its outer extents)."""
    row: int
    """Elements of a row (the table's innermost extent)."""
    per_row: int
    """Outputs per row (the ids' elements)."""
    item: int
    """Bytes per table element."""

    @property
    def shared_bytes(self) -> int:
        """One row, in the table's element type."""
        return self.row * self.item

    @property
    def words(self) -> int:
        """Elements per 16-byte staging word."""
        return WORD_BYTES // self.item


def find(ops: Sequence[Operation], args: Sequence[BlockArgument],
         shape: Sequence[int]) -> StagedGather | None:
    """The group's gather that could be staged by rows, else None: the only
    gather of `ops`, along the table's innermost axis, its table a group
    input it alone reads and its result the iteration shape `shape` (so a
    block's outputs are one table row's)."""
    gathers = [op for op in ops if isinstance(op, nn.GatherOp)]
    if len(gathers) != 1:
        return None
    op = gathers[0]
    table, ids = op.operands
    t_shape = tensor_shape(table)
    if (not isinstance(table, BlockArgument) or table not in args or op.axis != len(t_shape) - 1
            or any(u.operation is not op for u in table.uses)
            or tuple(tensor_shape(op.results[0])) != tuple(shape) or not numel(tuple(shape))):
        return None
    if dtype_name(table) not in STAGED_DTYPES:
        return None
    item = of_device_dtype(dtype_name(table)).width
    return StagedGather(op, table, numel(t_shape[:-1]), t_shape[-1], numel(tensor_shape(ids)),
                        item)


def parts(staged: StagedGather, out_item: int, target: Target) -> int:
    """Blocks per table row when staging pays and fits on `target`, else 0
    (module docstring)."""
    if staged.shared_bytes > target.shared_memory_per_block:
        return 0
    if staged.shared_bytes > staged.per_row * PAYS_SECTOR_BYTES:
        return 0
    resident = target.sms * max(1, min(MAX_RESIDENT, target.shared_memory_per_sm
                                       // max(1, staged.shared_bytes)))
    if staged.rows >= resident:
        return 1
    most = max(1, min(staged.per_row * out_item // staged.shared_bytes, target.max_grid_yz))
    least = min(most, -(-resident // staged.rows))  # one full wave
    return max(range(least, min(most, 2 * least) + 1),
               key=lambda p: (round(_wave_use(staged.rows * p, resident), 1), -p))


MAX_RESIDENT = 4
"""Blocks per SM counted at most when a small row leaves room for more."""


def _wave_use(blocks: int, resident: int) -> float:
    """The share of the waves' block slots that `blocks` fill."""
    return blocks / (-(-blocks // resident) * resident)
