"""What a scheduled group costs the machine, per kind: the threads its
schedule launches, its kernels and the kernel path that prices it
(`GroupKind.scheduled_kernel`; legality's
`gain_ok` prices a candidate group with it, `analysis/scheduled_cost.py`).

- pointwise: `elements_per_thread` per thread over the iteration space,
  the transposed-operand tile priced on its own path;
- reduction: the row schedule's grid x block (split rows included; a
  row held in registers counts each lane's loads in flight as the threads
  of a pointwise kernel with as many, `POINTWISE_ELEMENTS_PER_THREAD` each); a
  column split into two kernels counts two launches. The passes that read a
  row again from memory are not priced (`analysis/reduction_passes.py` says
  why: the steps towards a one-kernel softmax would each look slower);
- contraction: the GEMM tile's blocks x threads (a library GEMM: the
  library's path);
- window: the tiled plan's grid x block, or one thread per output of the
  conv + pool kernel.
"""

from __future__ import annotations

from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from fusec.analysis.cost_model import POINTWISE_ELEMENTS_PER_THREAD
from fusec.analysis.decompose_group import decomposed
from fusec.analysis.scheduled_cost import ScheduledKernel
from fusec.dialects.element_types import BY_NAME
from fusec.dialects.fusion import GroupOp
from fusec.dialects.nn_base import element_type_name, tensor_shape
from fusec.dialects.schedule import ContractionSchedule, ReductionSchedule, ScheduleAttr
from fusec.dialects.shapes import numel
from fusec.scheduling import reduction_schedule as reduction
from fusec.scheduling.contraction_schedule import tile_of
from fusec.scheduling.gemm_shape import analyze_group as analyze_gemm
from fusec.scheduling.kinds.common import body_results
from fusec.scheduling.reduction_plan import RowAnalysis
from fusec.scheduling.reduction_plan import analyze_group as analyze_rows
from fusec.scheduling.window_schedule import group_window


def value_bytes(v: SSAValue) -> int:
    """Bytes of tensor `v` in memory (4 per element of a type not in the table)."""
    t = v.type
    if not isinstance(t, TensorType):
        return 0
    row = BY_NAME.get(element_type_name(t.element_type))
    return numel(tensor_shape(v)) * (row.width if row is not None else 4)


def iteration_elements(group: GroupOp) -> int:
    """Elements of the largest result: a pointwise group's iteration space."""
    return max((numel(tensor_shape(v)) for v in body_results(group)), default=1)


def pointwise_kernel(group: GroupOp, attr: ScheduleAttr | None, path: str) -> ScheduledKernel:
    """A flat or tiled pointwise schedule: one thread per
    `elements_per_thread` elements of the iteration space."""
    per = max(1, attr.int_field("elements_per_thread")) if attr is not None else 1
    threads = -(-iteration_elements(group) // per)
    return ScheduledKernel("", max(1, threads), path)


def reduction_kernel(group: GroupOp, attr: ReductionSchedule, resident: int) -> ScheduledKernel:
    """The row schedule's threads and kernels; a split schedule fills the
    GPU (`resident` threads): the scheduler splits rows until they do, or
    until each lane streams `MIN_SPLIT_ELEMS` elements, which hides as much."""
    with decomposed(group) as flat:
        ra = reduction_rows(flat)
        sched = reduction.from_attr(ra, attr)
        grid, block = sched.grid(ra.rows), sched.block
        threads = grid[0] * grid[1] * block[0] * block[1]
        if sched.registers:  # a lane loads its whole row share before reducing
            threads *= max(1, sched.per_lane // POINTWISE_ELEMENTS_PER_THREAD)
        if sched.splits > 1:  # split as far as fills the GPU or chunks allow
            threads = max(threads, resident)
        launches = 2 if reduction.split_passes(ra, sched) else 1
    return ScheduledKernel("", max(1, threads), "reduction", launches)


def reduction_rows(flat: GroupOp) -> RowAnalysis:
    """The rows of a (decomposed) reduction group."""
    return analyze_rows(flat)


def contraction_kernel(group: GroupOp, attr: ScheduleAttr | None) -> ScheduledKernel:
    """The GEMM tile's blocks x threads; a library GEMM on the library path."""
    with decomposed(group) as flat:
        g = analyze_gemm(flat)
        batch, m, n = max(1, numel(g.batch)), g.m, g.n
    if not isinstance(attr, ContractionSchedule) or attr.str_field("impl") == "library":
        return ScheduledKernel("", max(1, batch * m * n), "library_gemm")
    tile = tile_of(attr)
    blocks = batch * -(-m // tile.bm) * -(-n // tile.bn)
    return ScheduledKernel("", blocks * tile.threads, "simt_gemm")


def window_kernel(group: GroupOp, attr: ScheduleAttr | None) -> ScheduledKernel:
    """The tiled plan's grid x block; conv + pool one thread per output
    (its conv is a direct loop over channels and taps)."""
    path = attr.str_field("path") if attr is not None else "direct"
    tiled = group_window(group)
    if path in ("conv_pool", "direct") or tiled is None:
        kernel = "conv_pool" if path == "conv_pool" else "window_direct"
        return ScheduledKernel("", iteration_elements(group), kernel)
    grid = tiled.grid
    return ScheduledKernel("", grid[0] * grid[1] * grid[2] * tiled.threads, "window_tiled")
