"""The plan of a window group (`WindowGroupPlan`), from its recorded
`#fusion.window` schedule: the path that writes it and what that path reads.

- `direct`: the window shape (`scheduling/window_shape.py`) and the launch of
  its grid-stride loop (`scheduling/grid_stride.py`);
- a tiled path (`general`, `depthwise`, ...): the window shape and the tiled
  plan the schedule records (`scheduling/window_plan.py`), checked against
  the target's limits;
- `conv_pool`: the conv and the pool, the pooled tile a block computes and
  the conv tile (with its halo) it stages (`scheduling/conv_pool_tile.py`).

The window writers (`codegen/window.py`, `window_tiled.py`, `conv_pool.py`)
read it and decide nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusec.analysis.diagnostics import op_error
from fusec.analysis.group_body import GroupBody
from fusec.analysis.targets import Target
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import WindowSchedule
from fusec.dialects.shapes import numel
from fusec.scheduling.conv_pool_tile import POOL_TILE, shared_tile
from fusec.scheduling.grid_stride import grid_stride_launch
from fusec.scheduling.schedule_input import group_schedule
from fusec.scheduling.window_plan import TiledWindow, check_plan, geometry, recorded_plan
from fusec.scheduling.window_shape import WindowShape, analyze

Launch = tuple[tuple[int, int, int], tuple[int, int, int]]


@dataclass(frozen=True)
class ConvPool:
    """A conv + pool group: its two ops, the pooled tile one block computes
    and the conv tile (rows, columns, with the halo) it stages in shared memory."""

    conv: nn.Conv2dOp
    pool: nn.MaxPool2dOp | nn.AvgPool2dOp
    pool_tile: tuple[int, int]
    conv_tile: tuple[int, int]


@dataclass(frozen=True)
class WindowGroupPlan:
    """Every decision behind one window group's kernel."""

    path: str
    """The schedule's path: "direct", "conv_pool" or a tiled one."""
    body: GroupBody
    shape: WindowShape | None
    """The window op and its taps (None on the conv + pool path)."""
    tiled: TiledWindow | None
    """The tiled plan (tiled paths only)."""
    conv_pool: ConvPool | None
    """The conv + pool plan (that path only)."""
    launch: Launch | None
    """The direct kernel's grid-stride launch (that path only)."""


def plan_window(group: GroupOp, body: GroupOp, target: Target) -> WindowGroupPlan:
    """The plan of window `group`, whose (decomposed) body is `body`, on the
    path its recorded schedule names, for `target`."""
    schedule = group_schedule(group, WindowSchedule)
    path = schedule.str_field("path")
    flat = GroupBody.of(body)
    if path == "conv_pool":
        tile = (schedule.int_field("th"), schedule.int_field("tw"))
        return WindowGroupPlan(path, flat, None, None, _conv_pool(group, flat, tile), None)
    w = analyze(flat)
    if path == "direct":
        return WindowGroupPlan(path, flat, w, None, None, grid_stride_launch(numel(w.out), target))
    return WindowGroupPlan(path, flat, w, _recorded_tiles(group, w, target), None, None)


def _conv_pool(group: GroupOp, body: GroupBody, tile: tuple[int, int]) -> ConvPool:
    if tile != (POOL_TILE, POOL_TILE):
        raise op_error(group, f"the conv + pool kernel builds {POOL_TILE}x{POOL_TILE} pooled "
                       f"tiles, not {tile[0]}x{tile[1]}")
    conv, pool = split_conv_pool(body)
    return ConvPool(conv, pool, tile, shared_tile(pool, tile))


def _recorded_tiles(group: GroupOp, w: WindowShape, target: Target) -> TiledWindow:
    """The tiled schedule `tile-and-promote` recorded on the group, checked
    against `target`."""
    plan = recorded_plan(group)
    assert plan is not None
    tiled = TiledWindow(geometry(w.op), plan)
    problem = check_plan(tiled, target)
    if problem is not None:
        raise op_error(group, f"cannot build the recorded window schedule: {problem}")
    return tiled


def split_conv_pool(body: GroupBody) -> tuple[nn.Conv2dOp, nn.MaxPool2dOp | nn.AvgPool2dOp]:
    """The conv and the pool of the group, or a located error."""
    convs = [op for op in body.ops if isinstance(op, nn.Conv2dOp)]
    pools = [op for op in body.ops if isinstance(op, (nn.MaxPool2dOp, nn.AvgPool2dOp))]
    if len(convs) != 1 or len(pools) != 1:
        raise op_error(body.group, "a conv + pool group holds one nn.conv2d and one pool")
    return convs[0], pools[0]
