"""Choosing a lone window op's tiled schedule (`scheduling/window_plan.py`):
the default plan `tile-and-promote` starts from, the smaller tiles it falls
back to under a shared-memory limit, and the smaller thread tiles
`register-budget` falls back to under a register budget.

The defaults are fitted to MobileNet's shapes (56x56 images, 32 to 192
channels) on H200:

- 1x1 conv: 128 consecutive pixels per block (32 pixel lanes x 4 pixels),
  8 output channels per thread (4 in f64), as many channel lanes as fit 256
  threads; every input channel in one step when a thread stages at most 16
  inputs, else pipelined steps of at most 8 inputs per thread;
- general conv: 4 output rows per thread (fewer on small images) of a tile
  up to 32 wide, 64 pixel lanes, 8 channels per thread, 8 input channels per
  step while a thread stages at most 16 elements;
- depthwise conv and pools: a tile as wide as the image up to 64, 128 lanes,
  4 rows per thread (fewer for strided windows, whose halo is larger).

Spatial tiles waste at most 15% of their rows on the image's edge.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from fusec.analysis.targets import Target
from fusec.dialects.fusion import GroupOp
from fusec.scheduling.window_plan import (
    TiledWindow,
    WindowGeometry,
    WindowPlan,
    geometry,
    recorded_plan,
    window_op,
)

PIXEL_TILE = 128  # pixels per block of a 1x1 conv: 32 pixel lanes x 4 pixels each
PIXELS_PER_THREAD = 4  # 4 pixels x 8 channels: 32 FMAs per 12 shared-memory reads
CHANNELS_PER_THREAD = 8
CONV_THREADS = 256  # threads per block of the two conv paths, at most
PIXEL_CI_STEP = 32  # input channels per step of a 1x1 conv, at most
STAGED_ONE_STEP = 16  # inputs a thread may stage when one step covers every channel
STAGED_PER_STEP = 8  # inputs a thread stages per step of a pipelined 1x1 conv
GENERAL_CI_STEP = 8  # input channels per step of a general conv (halo tile x 8)
STAGED_GENERAL = 16  # elements a thread stages per step of a general conv, at most
GENERAL_PIXEL_THREADS = 64  # pixel lanes of a general conv block
DEPTHWISE_THREADS = 128  # threads per block of a depthwise conv or pool
ROWS_PER_THREAD = 4  # consecutive output rows per thread (depthwise, general)
MAX_TILE_WIDTH = 64  # a narrower image is covered by one tile across
MIN_TILE_WIDTH = 16
HALO_LIMIT = 1.5  # staged over needed input of a depthwise tile before it gets deeper
DEEP_ROWS_PER_THREAD = 8  # rows per thread of such a deeper tile, at most
DEEP_THREADS = 256  # threads per block of such a deeper tile, at most
DEEP_SHARED_BYTES = 16384  # shared memory of such a deeper tile, at most
MAX_TILE_WASTE = 0.15  # padded rows a spatial tile may waste to give a block more threads


def _least_waste(extent: int, sizes: list[int]) -> int:
    """The size among `sizes` (largest first) that covers `extent` with the
    fewest padded positions."""
    return min(sizes, key=lambda s: (-(-extent // s) * s - extent, -s))


def _largest_fitting(extent: int, most: int) -> int:
    """The largest size up to `most` that covers `extent` wasting at most
    `MAX_TILE_WASTE` of the padded positions (the least wasteful otherwise)."""
    for size in range(most, 0, -1):
        padded = -(-extent // size) * size
        if padded - extent <= MAX_TILE_WASTE * padded:
            return size
    return _least_waste(extent, list(range(most, 0, -1)))


def _pow2_at_least(v: int) -> int:
    return 1 << max(0, (v - 1).bit_length())


def _channel_tile(per_group_out: int, ot: int, lanes: int) -> int:
    """Output channels per block: `ot` per thread, as many channel lanes (a
    power of two) as fit `CONV_THREADS` threads next to `lanes` pixel
    lanes, no more than the group has."""
    most = max(1, min(-(-per_group_out // ot), CONV_THREADS // max(1, lanes)))
    return ot * (1 << (most.bit_length() - 1))


def _channels_per_thread(geo: WindowGeometry) -> int:
    """`ot`: 8 channels per thread in f32, 4 in f64 (whose accumulators
    take two registers each), no more than a group has."""
    return min(CHANNELS_PER_THREAD * 4 // geo.item, geo.per_group_out)


def default_plan(geo: WindowGeometry) -> WindowPlan:
    """The plan for `geo` before any limit (see the module docstring)."""
    if geo.mode == "pixels":
        pixels = geo.oh * geo.ow
        tw = min(PIXEL_TILE, _pow2_at_least(pixels))
        pt = min(PIXELS_PER_THREAD, max(1, tw // 32))
        ot = _channels_per_thread(geo)
        oc_t = _channel_tile(geo.per_group_out, ot, tw // pt)
        threads = (tw // pt) * (oc_t // ot)
        # Each staged input holds a register until it is stored to shared
        # memory: all channels in one step when a thread stages at most
        # STAGED_ONE_STEP of them (no loop, nothing prefetched), else steps
        # of at most STAGED_PER_STEP per thread (prefetched during the FMAs).
        if geo.per_group_in * tw <= STAGED_ONE_STEP * threads:
            return WindowPlan(1, tw, oc_t, geo.per_group_in, pt, ot)
        most = max(1, STAGED_PER_STEP * threads // tw)
        step = min(PIXEL_CI_STEP, geo.per_group_in, 1 << (most.bit_length() - 1))
        return WindowPlan(1, tw, oc_t, step, pt, ot)
    if geo.ow <= MAX_TILE_WIDTH:
        tw = geo.ow
    else:
        tw = _least_waste(geo.ow, list(range(MAX_TILE_WIDTH, MIN_TILE_WIDTH - 1, -1)))
    if geo.mode != "depthwise" and tw > 32:  # a conv block also spans channels
        tw = _least_waste(geo.ow, list(range(32, MIN_TILE_WIDTH - 1, -1)))
    lanes = DEPTHWISE_THREADS if geo.mode == "depthwise" else GENERAL_PIXEL_THREADS
    # rows per thread: fewer on a small image, which would leave few lanes,
    # and for a strided window, whose halo tile would give each thread
    # many elements to stage
    most = max(1, ROWS_PER_THREAD * 2 // (geo.sh * geo.sw)) if geo.mode == "depthwise" else 4
    pt = next((pt for pt in (4, 2) if pt <= min(most, ROWS_PER_THREAD)
               and -(-geo.oh // pt) * tw * 2 >= lanes), 1)
    pt = min(pt, geo.oh)
    groups = _largest_fitting(-(-geo.oh // pt), max(1, min(-(-geo.oh // pt), lanes // tw)))
    if geo.mode == "depthwise":
        return _deeper_halo_tile(geo, WindowPlan(pt * groups, tw, 1, 1, pt, 1))
    ot = _channels_per_thread(geo)
    oc_t = _channel_tile(geo.per_group_out, ot, groups * tw)
    step = min(GENERAL_CI_STEP, geo.per_group_in)
    plan = WindowPlan(pt * groups, tw, oc_t, step, pt, ot)
    # fewer channels per step while a thread would stage too many elements
    while plan.ci_step > 1 and TiledWindow(geo, plan).staged_per_thread > STAGED_GENERAL:
        plan = replace(plan, ci_step=plan.ci_step // 2)
    return plan


def staged_per_output(tiled: TiledWindow) -> float:
    """Input elements a depthwise plan stages per input element its outputs
    need (the halo tiles of all blocks, over `sh * sw` per output)."""
    g = tiled.geo
    rows, cols = tiled.halo
    tiles_h, tiles_w = tiled.spatial_tiles
    return tiles_h * tiles_w * rows * cols / (g.oh * g.ow * g.sh * g.sw)


def _deeper_halo_tile(geo: WindowGeometry, plan: WindowPlan) -> WindowPlan:
    """A depthwise plan whose halo rows (`(kh - 1) * dh`: a dilated or large
    window) make its blocks stage over `HALO_LIMIT` times the input they
    need gets more rows: up to `DEEP_ROWS_PER_THREAD` per thread for a conv
    (the rows their taps share read once) and `DEEP_THREADS` threads, the tile that
    stages the least (the image's edge counted) kept."""
    start = TiledWindow(geo, plan)
    if staged_per_output(start) <= HALO_LIMIT:
        return plan
    best, cost = plan, staged_per_output(start)
    # a pool's each further row holds its running value and its taps in flight
    # (`register_model.WINDOW_POOL_PER_OUTPUT_ROW`): only a conv gets 8 rows
    deepest = DEEP_ROWS_PER_THREAD if geo.kind == "conv" else ROWS_PER_THREAD
    for pt in sorted({ROWS_PER_THREAD, deepest}):
        for threads in (DEPTHWISE_THREADS, DEEP_THREADS):
            cand = _tall_tile(geo, plan.tw, pt, threads)
            if cand.shared_bytes > DEEP_SHARED_BYTES or cand.threads > DEEP_THREADS:
                continue
            if staged_per_output(cand) < cost - 1e-9:
                best, cost = cand.plan, staged_per_output(cand)
    return best


# Threads per block of the deeper depthwise plans `deeper_plans` offers.
DEEPER_THREADS = (128, 256, 512)


def deeper_plans(tiled: TiledWindow) -> Iterator[TiledWindow]:
    """Depthwise plans with more output rows per block than `tiled` (the
    same tile width): every `pt` up to `DEEP_ROWS_PER_THREAD` (a pool: up
    to `ROWS_PER_THREAD`) by `DEEPER_THREADS`. A block stages its whole
    halo tile before it computes, so a taller tile keeps more bytes in
    flight per thread; whether that pays on a narrow image is the
    autotuner's measurement to make (`kinds/window.py` offers them)."""
    if tiled.mode != "depthwise":
        return
    g, p = tiled.geo, tiled.plan
    deepest = DEEP_ROWS_PER_THREAD if g.kind == "conv" else ROWS_PER_THREAD
    seen = {(p.th, p.pt)}
    for pt in (1, 2, 4, 8):
        if pt > min(deepest, g.oh):
            continue
        for threads in DEEPER_THREADS:
            cand = _tall_tile(g, p.tw, pt, threads)
            key = (cand.plan.th, cand.plan.pt)
            if cand.plan.th <= p.th or key in seen:
                continue
            seen.add(key)
            yield cand


def _tall_tile(geo: WindowGeometry, tw: int, pt: int, threads: int) -> TiledWindow:
    """The depthwise tile `tw` wide with `pt` rows per thread and as many
    row groups as `threads` threads hold, no taller than the image needs."""
    th = min(pt * max(1, threads // tw), -(-geo.oh // pt) * pt)
    return TiledWindow(geo, WindowPlan(th, tw, 1, 1, min(pt, th), 1))


def _halve(v: int, floor: int) -> int:
    return max(floor, v // 2)


def shrink_steps(tiled: TiledWindow) -> Iterator[TiledWindow]:
    """Ever smaller plans for a shared-memory limit, keeping the thread
    tile: fewer channels per step first (more barriers, the same reuse),
    then a smaller spatial tile, then fewer output channels per block."""
    cur = tiled
    while True:
        p = cur.plan
        if p.ci_step > 1:
            nxt = replace(p, ci_step=_halve(p.ci_step, 1))
        elif cur.mode == "pixels" and p.tw > p.pt:
            nxt = replace(p, tw=_halve(p.tw, p.pt))
        elif cur.mode != "pixels" and (p.th > p.pt or p.tw > 1):
            # the longer side first; rows stay a multiple of the thread's rows
            if p.th > p.pt and (p.th >= p.tw or p.tw == 1):
                nxt = replace(p, th=max(p.pt, p.th // 2 // p.pt * p.pt))
            else:
                nxt = replace(p, tw=_halve(p.tw, 1))
        elif p.oc_t > p.ot:
            nxt = replace(p, oc_t=_halve(p.oc_t, p.ot) // p.ot * p.ot)
        elif p.pt > 1:
            nxt = replace(p, th=_halve(p.th, 1), pt=_halve(p.pt, 1),
                          tw=p.tw // p.pt * _halve(p.pt, 1) if cur.mode == "pixels" else p.tw)
        else:
            return
        cur = TiledWindow(cur.geo, nxt)
        yield cur


def fit_shared(tiled: TiledWindow, limit: int, target: Target) -> TiledWindow | None:
    """The first of `tiled` and its shrink steps whose shared memory fits
    `limit` (and `target`'s static shared memory: the tiles are static
    arrays), or None."""
    limit = min(limit, target.static_shared_limit)
    if tiled.shared_bytes <= limit:
        return tiled
    return next((t for t in shrink_steps(tiled) if t.shared_bytes <= limit), None)


def smallest(tiled: TiledWindow) -> TiledWindow:
    """The last shrink step (what is left when nothing fits)."""
    last = tiled
    for last in shrink_steps(tiled):  # noqa: B007 - the loop keeps the last one
        pass
    return last


# Thread tiles `register-budget` falls back to, most outputs per thread first.
THREAD_TILES: tuple[tuple[int, int], ...] = ((4, 8), (4, 4), (2, 4), (2, 2), (1, 2), (1, 1))


def with_thread_tile(tiled: TiledWindow, pt: int, ot: int) -> TiledWindow:
    """The plan with `pt x ot` outputs per thread (no more than the block
    tile holds), its block tile shrunk until the block has at most
    `CONV_THREADS` threads (depthwise: `DEPTHWISE_THREADS` or the old count)."""
    p, mode = tiled.plan, tiled.mode
    pt = min(pt, p.pt)
    ot = min(ot, p.ot)
    if mode == "pixels":
        plan = replace(p, pt=pt, ot=ot, oc_t=max(ot, p.oc_t // ot * ot))
    else:
        plan = replace(p, pt=pt, ot=ot, th=max(pt, p.th // pt * pt),
                       oc_t=max(ot, p.oc_t // ot * ot))
    cap = max(tiled.threads, CONV_THREADS if mode != "depthwise" else DEPTHWISE_THREADS)
    out = TiledWindow(tiled.geo, plan)
    while out.threads > cap:
        q = out.plan
        if q.oc_t > q.ot:
            q = replace(q, oc_t=_halve(q.oc_t, q.ot) // q.ot * q.ot)
        elif mode == "pixels":
            q = replace(q, tw=_halve(q.tw, q.pt))
        elif q.th > q.pt:
            q = replace(q, th=max(q.pt, q.th // 2 // q.pt * q.pt))
        else:
            q = replace(q, tw=_halve(q.tw, 1))
        out = TiledWindow(tiled.geo, q)
    return out


def thread_tiles_below(tiled: TiledWindow) -> Iterator[TiledWindow]:
    """Plans with fewer outputs per thread than `tiled`, most first."""
    p = tiled.plan
    seen = {(p.pt, p.ot)}
    for pt, ot in THREAD_TILES:
        cand = with_thread_tile(tiled, pt, ot)
        key = (cand.plan.pt, cand.plan.ot)
        if key in seen or cand.plan.pt * cand.plan.ot >= p.pt * p.ot:
            continue
        seen.add(key)
        yield cand


def group_window(group: GroupOp) -> TiledWindow | None:
    """The tiled schedule of a lone window group: the recorded plan, else
    the default (what `tile-and-promote` starts from); None for conv + pool."""
    op = window_op(group)
    if op is None:
        return None
    geo = geometry(op)
    return TiledWindow(geo, recorded_plan(group) or default_plan(geo))


