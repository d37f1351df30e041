"""The reduction schedule: how a reduction group's rows map onto threads
(`codegen/reduction.py` renders it), chosen for a target and recorded as
`#fusion.reduction<...>` (`dialects/schedule.py`).

- row layout (the reduced axes are the trailing ones): `lanes` threads share
  a row, `rows_per_block` rows per block; the row lives in registers when it
  fits `register_elems` elements per lane, else it is streamed, with the
  values later passes need cached in shared memory as far as the budget
  allows (`row = "shared"`), or re-read from memory (`row = "memory"`);
- column layout (the last axis is kept): threadIdx.x runs over rows;
- split rows: when the rows' threads are fewer than half of what fills the
  target (`FILL_WAVES` x its resident threads), each row is split over
  `splits` blocks of `chunk` elements (`_split_rows`, `splittable`): one
  kernel whose last block combines the partials when the group has one
  reduction pass and no row-shaped output; two kernels ("split passes",
  `split_passes`) for a column group with one pass of statistics and a final
  pass over the column (a softmax or log-softmax whose max and sum share
  pass 1, `x - mean(x)`): partial statistics per block into a workspace,
  then a kernel that combines them and writes its chunk's outputs, reading
  the input a second time. A group with two passes of statistics (a layer
  norm) or a row cache does not split;
- wide blocks: a schedule that cannot split (several passes, or a
  row-shaped output) doubles its lanes instead, up to the threads per block
  the target's registers allow, a column block then halving its columns
  (`_widen`); a softmax's max and sum of exps share pass 1 when the row is
  re-read from memory (`online`, `codegen/reduction_online.py`), folded a
  chunk of `unroll` elements at a time: the chunk's loads first, one
  rescale of the running sum per chunk, no branch per element;
- vector rows: a row schedule reads and writes its rows four elements per
  access (`vector = 4`, `codegen/reduction_vector.py`) where the rows allow;
  lanes, per-lane elements and split chunks then count in quads.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from xdsl.ir import Operation, SSAValue

from fusec.analysis.diagnostics import InternalError
from fusec.analysis.group_body import compute_type
from fusec.analysis.reduction_views import Layout, folded_views, natural_layout, read_layout
from fusec.analysis.targets import WARP_SIZE, Target
from fusec.dialects.schedule import ReductionSchedule
from fusec.scheduling.online_pair import online_pair
from fusec.scheduling.reduction_plan import RowAnalysis
from fusec.scheduling.row_vector import vector_width

BLOCK_THREADS = 256  # threads per block
MAX_LANES = 256  # threads cooperating on one row (a power of two)
COLUMN_ROWS = WARP_SIZE  # rows per block in the column schedule: one warp of consecutive rows
# Register-resident rows: at most this many row elements per lane. Measured on
# H200 (2026-11-30, 16384 rows of 4096 f32): softmax with 32 elements x 128
# lanes ran at 93% of copy bandwidth, 16 x 256 at 88%, 8 x 512 at 75%,
# 4 x 1024 at 52%; add + layer_norm + gelu 82%, 80%, 77%, 54%; 64 x 64 lanes
# 83% and 66%.
REGISTER_ELEMS = 32
# Threads per block of the register schedule (more rows per block when rows
# are short): the measured 4096-element rows ran best as one 128-lane row.
REGISTER_BLOCK_THREADS = 128
# Lanes of a row at least, when the row is that long: one warp reads one
# contiguous 128-byte line per element.
MIN_REGISTER_LANES = WARP_SIZE
# Threads a reduction should run as, at least: `FILL_WAVES` times what the
# target holds at once (H200: 132 SMs x 2048), so the last wave's idle SMs
# cost little. A schedule with fewer than half as many splits its rows over
# more blocks. Measured on H200 (2026-11-30): a column sum of 8192 x 8192 f32
# took 0.11 ms unsplit and about 0.08 ms in 16 splits; the sum of 64 columns
# of a million rows 9.0 ms in 2 blocks, 0.08-0.10 ms in 512 or 2048 splits.
FILL_WAVES = 4
# Row elements one lane reduces per split at least: fewer, and the partials'
# round trip through the workspace costs more than the split gains.
MIN_SPLIT_ELEMS = 64
MAX_SPLITS = 4096
# Row elements a lane loads per step of a streamed pass, written out one after
# another so their loads are in flight together: one load per lane at a time
# keeps about 8 KB in flight per SM, far from what HBM needs.
STREAM_UNROLL = 4
# Columns of a column block at least, when a wide block trades columns for
# lanes: a warp then reads two rows of 64 contiguous bytes (whole sectors).
MIN_COLUMN_ROWS = 16


@dataclass(frozen=True)
class ReductionOptions:
    """Tunables of the reduction schedule (defaults: the named constants;
    None: the target's limit, which `for_target` fills in).

    `registers` allows the register-resident row schedule
    (`codegen/reduction_registers.py`) for row (not column) reductions whose
    row fits `register_elems` elements per lane; otherwise rows are streamed
    with the shared-memory row cache."""

    block_threads: int = BLOCK_THREADS
    max_lanes: int = MAX_LANES
    shared_budget: int | None = None  # bytes of shared memory (None: the target's static limit)
    registers: bool = True
    register_elems: int = REGISTER_ELEMS
    # Lanes of one register-resident row at most (None: the target's block limit).
    max_register_lanes: int | None = None
    split: bool = True  # rows split over blocks when they cannot fill the GPU
    fill_threads: int = 0  # 0: FILL_WAVES x the target's resident threads (for_target)
    min_split_elems: int = MIN_SPLIT_ELEMS
    unroll: int = STREAM_UNROLL
    # Threads per block at most when a schedule that cannot split widens its
    # lanes along the reduced axis to fill the GPU (see `_widen`; None: the
    # target's block limit).
    max_block_threads: int | None = None
    # A softmax's max and sum of exps in one pass when its row is re-read
    # from memory (`codegen/reduction_online.py`): two reads, not three.
    online: bool = True
    # Row elements per access at most (`codegen/reduction_vector.py`): 4
    # reads rows by quads where they allow it, 1 one element at a time.
    vector: int = 4


# The tunables the scheduler starts from (tests may swap it); `for_target`
# fills in what depends on the GPU.
DEFAULT_OPTIONS = ReductionOptions()


def for_target(target: Target, opts: ReductionOptions | None = None,
               shared_limit: int = 0) -> ReductionOptions:
    """`opts` (default `DEFAULT_OPTIONS`) on `target`: the threads that fill
    it, the target's limits where `opts` leaves them open, and the
    shared-memory budget no larger than `shared_limit` (0: none)."""
    opts = opts or DEFAULT_OPTIONS
    fill = opts.fill_threads or FILL_WAVES * target.max_resident_threads
    own = target.static_shared_limit if opts.shared_budget is None else opts.shared_budget
    budget = min(own, shared_limit) if shared_limit else own
    most = target.max_threads_per_block
    lanes = most if opts.max_register_lanes is None else opts.max_register_lanes
    # A block of more threads could not launch with the registers the target
    # budgets per thread (numba sets no register cap).
    block = min(most if opts.max_block_threads is None else opts.max_block_threads,
                target.registers_per_sm // target.register_budget)
    return replace(opts, fill_threads=fill, shared_budget=budget, max_register_lanes=lanes,
                   max_block_threads=block)


def _limit(value: int | None) -> int:
    """A limit of options `for_target` resolved (None there is a bug)."""
    if value is None:
        raise InternalError("reduction options used before for_target filled in the target's "
                            "limits")
    return value


@dataclass
class RowSchedule:
    """How the rows map onto threads, and which row values are cached."""

    column: bool  # column schedule (threadIdx.x runs over rows)
    lanes: int
    rows_per_block: int
    cached: list[SSAValue]  # computed (or loaded) in pass 1, read back by later passes
    scratch_bytes: int
    cache_bytes: int
    registers: bool = False  # the row stays in registers (reduction_registers)
    per_lane: int = 0  # register schedule: row elements per lane (the last may overhang)
    splits: int = 1  # blocks sharing one row (`blockIdx.y`), see "Split rows"
    chunk: int = 0  # split rows: the row elements of one block (a multiple of `lanes`)
    unroll: int = STREAM_UNROLL  # row elements per lane per step of a streamed pass
    online: bool = False  # a softmax's max and sum of exps share pass 1
    vector: int = 1  # row elements per access (reduction_vector)

    @property
    def block(self) -> tuple[int, int, int]:
        if self.column:
            return (self.rows_per_block, self.lanes, 1)
        return (self.lanes, self.rows_per_block, 1)

    def grid(self, rows: int) -> tuple[int, int, int]:
        return (-(-rows // self.rows_per_block), self.splits, 1)


def _pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def _bytes(v: SSAValue) -> int:
    return 8 if compute_type(v) in ("float64", "int64") else 4  # bytes in registers


def plan_schedule(ra: RowAnalysis, opts: ReductionOptions) -> RowSchedule:
    """Lanes and rows per block, and the row caches that fit the budget."""
    column = row_layout(ra) == "column"
    vec = vector_width(ra) if opts.vector >= 4 and not column else 1
    if not column and opts.registers and (regs := _register_schedule(ra, opts, vec)) is not None:
        # Rows in registers, unless they are too few to fill the GPU and
        # splitting them over blocks does.
        streamed = plan_schedule(ra, replace(opts, registers=False)) if opts.split else regs
        return streamed if streamed.splits > 1 else regs
    if column:
        rows = min(COLUMN_ROWS, _pow2_at_least(ra.rows), opts.block_threads)
        lanes = min(opts.block_threads // rows, _pow2_at_least(ra.row_length))
    else:
        lanes = min(opts.max_lanes, opts.block_threads, _pow2_at_least(ra.row_length // vec))
        rows = max(1, min(opts.block_threads // lanes, _pow2_at_least(ra.rows)))
    scratch = sum(rows * lanes * _bytes(r.results[0]) for r in ra.reductions)
    cached: list[SSAValue] = []
    cache_bytes = 0
    for v in cache_candidates(ra):
        size = rows * ra.row_length * _bytes(v)
        if scratch + cache_bytes + size <= _limit(opts.shared_budget):
            cached.append(v)
            cache_bytes += size
    sched = RowSchedule(column, lanes, rows, cached, scratch, cache_bytes, unroll=opts.unroll,
                        vector=vec)
    # Re-read from memory (not every candidate cached): fold pass 2 into pass 1.
    sched.online = (opts.online and len(cached) < len(cache_candidates(ra))
                    and online_pair(ra) is not None)
    if opts.split:
        _split_rows(ra, sched, opts)
    if sched.splits == 1:
        _widen(ra, sched, opts)
    return sched


def row_layout(ra: RowAnalysis) -> Layout:
    """Row-major operands: column when the last axis is kept and the
    reduced axes are not trailing. Operands read through views: the layout
    that keeps every row-varying access coalesced (`analysis/reduction_views.py`;
    fusion forms no group that has none, the natural one stands for it)."""
    body = ra.body
    if not folded_views(body.ops):
        return natural_layout(ra.shape, ra.axes)
    found = read_layout(body.ops, body.args, body.outputs, ra.shape, ra.axes)
    return found or natural_layout(ra.shape, ra.axes)


def _widen(ra: RowAnalysis, sched: RowSchedule, opts: ReductionOptions) -> None:
    """Double the lanes of an unsplit schedule while its threads are fewer
    than half of `fill_threads` and the row has elements for them: the rows
    that cannot be split still fill the GPU. The block grows up to
    `max_block_threads` (tree scratch and row cache within the budget); a
    column block then halves its columns, down to `MIN_COLUMN_ROWS`."""
    def threads() -> int:
        return sched.grid(ra.rows)[0] * sched.rows_per_block * sched.lanes

    while 2 * threads() <= opts.fill_threads and sched.lanes * sched.vector < ra.row_length:
        if (2 * sched.lanes * sched.rows_per_block <= _limit(opts.max_block_threads)
                and sched.cache_bytes + 2 * sched.scratch_bytes <= _limit(opts.shared_budget)):
            sched.scratch_bytes *= 2
        elif sched.column and sched.rows_per_block > MIN_COLUMN_ROWS and not sched.cached:
            sched.rows_per_block //= 2
        else:
            return
        sched.lanes *= 2


def _split_rows(ra: RowAnalysis, sched: RowSchedule, opts: ReductionOptions) -> None:
    """Split each row over several blocks when the rows' threads are fewer
    than half of `fill_threads` (see "Split rows"): as many splits as fill
    the GPU, each lane keeping at least `min_split_elems` elements."""
    if not splittable(ra, sched):
        return
    threads = sched.grid(ra.rows)[0] * sched.rows_per_block * sched.lanes
    if 2 * threads > opts.fill_threads:
        return
    want = -(-opts.fill_threads // threads)
    most = ra.row_length // (sched.lanes * max(opts.min_split_elems, sched.vector))
    splits = min(want, most, MAX_SPLITS)
    if splits < 2:
        return
    # Rather a few splits less whose chunks tile the row exactly: then no
    # element needs a bounds check and the pass unrolls.
    # A vector schedule's chunks are whole steps of quads.
    width = sched.lanes * sched.vector
    steps = ra.row_length // width if ra.row_length % width == 0 else 0
    exact = [k for k in range(splits, max(1, splits // 2), -1) if steps and steps % k == 0]
    splits = exact[0] if exact else splits
    per_lane = -(-ra.row_length // (splits * width))
    sched.chunk = per_lane * width
    sched.splits = -(-ra.row_length // sched.chunk)  # no block without elements


def split_passes(ra: RowAnalysis, sched: RowSchedule) -> bool:
    """Whether `sched` splits a group with a final pass over the row (or two
    reduction stages) into two kernels (see "Split passes"), rather than
    letting the last block of a single-pass split combine the partials."""
    return sched.splits > 1 and (ra.stages > 1 or bool(pass_roots(ra, ra.stages + 1)))


def splittable(ra: RowAnalysis, sched: RowSchedule) -> bool:
    """Whether `sched`'s rows may split over blocks: one pass of statistics
    (one reduction stage, or a softmax's two sharing pass 1 `online`) and no
    row cache; with a final pass over the row (split passes, two kernels)
    only in the column layout, whose columns alone often cannot fill the GPU."""
    if sched.cached or sched.registers or not (ra.stages == 1 or sched.online):
        return False
    return sched.column or (ra.stages == 1 and not pass_roots(ra, 2))


def _register_schedule(ra: RowAnalysis, opts: ReductionOptions,
                       vec: int = 1) -> RowSchedule | None:
    """The register-resident schedule: the fewest lanes (a power of two, at
    least a warp when the row has that many accesses) that hold the row in
    at most `register_elems` elements each, in whole accesses of `vec`
    elements; None when even the widest row of lanes would need more."""
    want = _pow2_at_least(-(-ra.row_length // max(opts.register_elems, vec)))
    lanes = max(min(MIN_REGISTER_LANES, _pow2_at_least(ra.row_length // vec)), want)
    if lanes > _limit(opts.max_register_lanes):
        return None
    rows = max(1, min(REGISTER_BLOCK_THREADS // lanes, _pow2_at_least(ra.rows)))
    scratch = sum(rows * lanes * _bytes(r.results[0]) for r in ra.reductions)
    per_lane = vec * -(-ra.row_length // (lanes * vec))
    return RowSchedule(False, lanes, rows, [], scratch, 0, True, per_lane, vector=vec)


def cache_candidates(ra: RowAnalysis) -> list[SSAValue]:
    """What the later passes read back: either the row-varying inputs they
    read, or the row-varying values they need that no reduction feeds (the
    *frontier*: `a + b` before a layer norm, rather than `a` and `b`),
    whichever takes fewer bytes per row."""
    inputs: list[SSAValue] = list(_reread_args(ra))
    frontier = _frontier(ra)
    if sum(map(_bytes, frontier)) <= sum(map(_bytes, inputs)):
        return frontier
    return inputs


def _frontier(ra: RowAnalysis) -> list[SSAValue]:
    """Row-varying values of stage 0 that passes 2.. evaluate per element and
    that read what pass 1 read (a value read only later gains nothing)."""
    first = set(ra.varying_args(pass_roots(ra, 1)))
    found: dict[SSAValue, None] = {}
    stack = [v for s in range(2, ra.stages + 2) for v in pass_roots(ra, s)]
    seen: set[SSAValue] = set()
    while stack:
        v = stack.pop()
        if v in seen or not ra.value_varies(v):
            continue
        seen.add(v)
        if ra.stage.get(v, 0) == 0:
            if first & set(ra.varying_args([v])):
                found[v] = None
        else:
            assert isinstance(v.owner, Operation)
            stack.extend(v.owner.operands)
    return list(found)


def pass_roots(ra: RowAnalysis, stage: int) -> list[SSAValue]:
    """What pass `stage` evaluates per element: the inputs of its reductions,
    or, for the final pass (stages + 1), the row-shaped outputs (those
    constant along the row too: their value is hoisted, their stores are not)."""
    if stage > ra.stages:
        return list(dict.fromkeys(v for v in ra.body.outputs if ra.stored_per_element(v)))
    return [r.operands[0] for r in ra.reductions if ra.stage[r.results[0]] == stage]


def _reread_args(ra: RowAnalysis) -> list[SSAValue]:
    """Row-varying inputs read by more than one pass, in order of first use."""
    uses: dict[SSAValue, int] = {}
    for stage in range(1, ra.stages + 2):
        for arg in ra.varying_args(pass_roots(ra, stage)):
            uses[arg] = uses.get(arg, 0) + 1
    return [a for a, n in uses.items() if n > 1]


def to_attr(ra: RowAnalysis, sched: RowSchedule) -> ReductionSchedule:
    """`sched` as the group's schedule attribute."""
    row = "registers" if sched.registers else (
        "shared" if len(sched.cached) == len(cache_candidates(ra)) else "memory")
    return ReductionSchedule.make(
        layout="column" if sched.column else "row", row=row, lanes=sched.lanes,
        rows_per_block=sched.rows_per_block, splits=sched.splits, chunk=sched.chunk,
        per_lane=sched.per_lane, cached=len(sched.cached), unroll=sched.unroll,
        online=int(sched.online), vector=sched.vector)


def from_attr(ra: RowAnalysis, attr: ReductionSchedule) -> RowSchedule:
    """The schedule `attr` records, applied to the rows of `ra`: the cached
    values are the first `cached` cache candidates."""
    lanes, rows = attr.int_field("lanes"), attr.int_field("rows_per_block")
    cached = cache_candidates(ra)[:attr.int_field("cached")]
    scratch = sum(rows * lanes * _bytes(r.results[0]) for r in ra.reductions)
    cache_bytes = sum(rows * ra.row_length * _bytes(v) for v in cached)
    return RowSchedule(
        column=attr.str_field("layout") == "column", lanes=lanes, rows_per_block=rows,
        cached=cached, scratch_bytes=scratch, cache_bytes=cache_bytes,
        registers=attr.str_field("row") == "registers", per_lane=attr.int_field("per_lane"),
        splits=attr.int_field("splits"), chunk=attr.int_field("chunk"),
        unroll=attr.int_field("unroll"), online=attr.int_field("online") == 1,
        vector=attr.int_field("vector"))
