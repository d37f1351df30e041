"""The pointwise schedule: elements per thread and threads per block
(`codegen/pointwise.py` renders it), recorded as `#fusion.pointwise<...>`.

Element e of thread t is chunk element `e * block + t`, so every load of a
warp reads 128 consecutive bytes. Measured on H200 (2026-11-30, 2^28 f32,
32-op chain, flat views): 4 strided elements per thread and one chunk per
block 97% of copy bandwidth (8: 96%, 16: 96%); 4 consecutive elements per
thread ([n/4, 4] views) 91%; a grid-stride loop over the chunks with the
grid capped at 2112 blocks 83%.

A group reading a transposed operand whose contiguous axis is not the
output's innermost one gets `tile = TRANSPOSE_TILE`: one `tile x tile` block
of outputs per block, the operand staged through shared memory so that both
its load and the store are coalesced (`block / tile` rows of threads, each
thread `tile * tile / block` elements).

A group whose gather reads most elements of a wide table's rows at random
gets `gather_parts`: each table row staged in shared memory, its outputs
gathered from there (`scheduling/staged_gather.py`), 512 threads per block.

A group that moves f16/bf16 gets 8 elements per thread: the emitter reads
its half arrays 4 consecutive elements (8 bytes) per access, so a thread
has two accesses in flight, 16 bytes per array as with 4 f32 elements.

The tile keeps that rule: with halves its block is `tile * tile / 8`
threads (128 for a 32-wide tile), 8 elements each, so a thread stages 16
bytes per operand as 4 f32 elements do, where 256 threads would leave 8
(two SMs' worth of warps in flight for half the bytes: the bf16 tiles ran
at 37-67% of the copy floor where f32 ran at 63-84%). Its rows are then
`tile * 8 / tile` threads apart: a side that aligns may move 16-byte words
of 8 halves (`scheduling/tile_vector.py`).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import TensorType
from xdsl.ir import Operation

from fusec.analysis.group_body import GroupBody, dtype_name
from fusec.analysis.targets import Target
from fusec.analysis.transposed_operands import tile_axes
from fusec.dialects.element_types import HALF_NAMES, of_device_dtype
from fusec.dialects.fusion import GroupOp
from fusec.dialects.nn_base import element_type_name, tensor_shape
from fusec.dialects.schedule import PointwiseSchedule
from fusec.scheduling import staged_gather

ELEMENTS_PER_THREAD = 4
"""Elements each thread loads (all before any arithmetic) per chunk."""
HALF_ELEMENTS_PER_THREAD = 8
"""The same for a group that reads or writes f16/bf16: two wide accesses of
4 halves, the 16 bytes per array in flight that 4 f32 elements give."""
BLOCK_THREADS = 256
"""Threads per block: 8 warps hide memory latency and leave the register
file room for 8 blocks per SM."""


TRANSPOSE_TILE = 32
"""Side of the shared-memory tile of a transposed operand: one warp reads a
tile row (128 bytes of f32) along the operand's contiguous axis, and one
warp writes a row of outputs along theirs."""


def pointwise_schedule(target: Target, tile: int = 0,
                       group: GroupOp | None = None) -> PointwiseSchedule:
    """The schedule of pointwise `group` on `target` (a block no larger than
    the target launches); `tile` > 0: the transposed-operand tile; more
    elements per thread when the group moves halves."""
    block = min(BLOCK_THREADS, target.max_threads_per_block)
    half = group is not None and any(
        isinstance(v.type, TensorType) and element_type_name(v.type.element_type) in HALF_NAMES
        for v in (*group.block.args, *group.results))
    if tile:
        # at least `ELEMENTS_PER_THREAD` per thread; halves as many as the
        # flat schedule gives them (the bytes in flight of 4 f32 elements)
        per_thread = max(HALF_ELEMENTS_PER_THREAD if half else ELEMENTS_PER_THREAD,
                         -(-tile * tile // block))
        return PointwiseSchedule.make(elements_per_thread=per_thread,
                                      block=tile * tile // per_thread, tile=tile)
    per_thread = HALF_ELEMENTS_PER_THREAD if half else ELEMENTS_PER_THREAD
    if group is not None and (parts := gather_parts(group, target)):
        return PointwiseSchedule.make(elements_per_thread=per_thread,
                                      block=min(STAGED_GATHER_THREADS,
                                                target.max_threads_per_block),
                                      gather_parts=parts)
    return PointwiseSchedule.make(elements_per_thread=per_thread, block=block)


STAGED_GATHER_THREADS = 512
"""Threads per block of a gather staged by rows: a block stages a whole row
before it writes anything, and few blocks fit an SM beside a row of tens of
KiB, so each keeps more staging loads in flight than 256 threads would."""


def gather_parts(group: GroupOp, target: Target) -> int:
    """Blocks per table row when `group`'s gather along a table's innermost
    axis is staged by rows on `target` (`scheduling/staged_gather.py`), else 0."""
    body = GroupBody.of(group)
    shapes = {tuple(tensor_shape(v)) for v in body.outputs}
    if len(shapes) != 1:
        return 0
    found = staged_gather.find(body.ops, body.args, next(iter(shapes)))
    if found is None:
        return 0
    out_item = max(of_device_dtype(dtype_name(v)).width for v in body.outputs)
    return staged_gather.parts(found, out_item, target)


def transpose_tile(ops: Sequence[Operation], shape: Sequence[int]) -> int:
    """The tile side a pointwise group of `ops` over `shape` needs: 0 unless
    a transposed operand moves the innermost axis."""
    return TRANSPOSE_TILE if tile_axes(ops, shape) is not None else 0
