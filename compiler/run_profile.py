"""`fusec run --profile [--roofline FILE.svg]`: after the run, each launch
of one call timed on the device beside the cost model's estimate, and the
device's copy bandwidth measured in the same run.

```
fusec run OUT --profile                       # the table (compiler/profile_table.py)
fusec run model.mlir --profile --roofline roofline.svg
```

The launches are timed by `runtime/launch_timer.py` (CUDA events around
each launch on the executor's stream, a warm-up call, the median of
`PROFILE_CALLS` calls, L2-sized rotation of the arguments), their flops
counted from the IR after the pipeline (`compiler/launch_flops.py`), the
table rendered by `compiler/profile_table.py` and the picture by
`compiler/roofline_svg.py`, written whole or not at all. In the simulator
the same path runs on the host's clock, with a note that its times say
nothing of a GPU.
"""

from __future__ import annotations

import datetime
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from fusec.analysis.diagnostics import FusecError, escape_controls
from fusec.analysis.targets import get_target
from fusec.compiler.launch_flops import launch_flops
from fusec.compiler.profile_table import ProfileRow, Roofs, profile_rows, render_table, si
from fusec.compiler.roofline_svg import Roof, RooflinePoint, roofline_svg

SIMULATOR_NOTE = ("fusec: note: --profile in the simulator: its events record no time, so "
                  "each launch is timed on the host's clock; the times say nothing of a GPU")


def check_roofline_path(roofline: str, inputs: Sequence[str | Path | None],
                        output: str | None) -> None:
    """An error before anything runs when the SVG could not be written, or
    would overwrite an input or `--output`'s file."""
    from fusec.compiler.outputs import refuse_input_as_output, through_link

    refuse_input_as_output(roofline, inputs)
    if output is not None and os.path.realpath(output) == os.path.realpath(roofline):
        raise FusecError(f"--roofline and --output both name '{roofline}'")
    target = through_link(Path(roofline))
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise FusecError(f"cannot write '{roofline}': it is a directory")
    if not parent.is_dir():
        raise FusecError(f"cannot write '{roofline}': the directory '{parent}' does not exist")


def profile_call(model: Any, inputs: Sequence[Any], compiled: ModuleOp | None,
                 target_name: str, roofline: str | None) -> None:
    """Time one call of `model` (a `CompiledModel`) on `inputs`, print the
    table, and write the roofline SVG to `roofline` if given. `compiled`:
    the IR after the pipeline, where the flops are counted."""
    from fusec.runtime.launch_timer import copy_bandwidth, device_name, time_launches

    ex = model.executor
    if ex.simulator:
        print(SIMULATOR_NOTE, file=sys.stderr)
    target = get_target(target_name)
    times = time_launches(ex, inputs, 0 if ex.simulator else target.l2_bytes)
    roofs = Roofs.of(target, copy_bandwidth(ex.cuda, ex.stream, ex.simulator))
    fp = ex.fp
    rows = profile_rows(fp, times.us, launch_flops(compiled, fp))
    device = device_name(ex.cuda, ex.simulator)
    rotated = f", rotating over {times.copies} copies of the arguments" \
        if times.copies > 1 else ""
    heading = (f"profile of @{escape_controls(fp.name)} on {device}: each launch's median "
               f"of {times.calls} calls after a warm-up call{rotated}")
    for line in render_table(rows, roofs, heading, target.name):
        print(line)
    if roofline is not None:
        title = f"fusec roofline: @{fp.name} on {device}, {datetime.date.today().isoformat()}"
        write_roofline(roofline, rows, roofs, target.name, title)
        print(f"wrote {escape_controls(roofline)}")


def roofline_points(rows: Sequence[ProfileRow], roofs: Roofs) -> list[RooflinePoint]:
    """The picture's point of each row, with its numbers as text."""
    points = []
    for r in rows:
        bound = r.memory_bound(roofs)
        kind = "" if bound is None else "; memory-bound" if bound else "; compute-bound"
        est = f" (est. {r.est_us:.2f} us)" if r.est_us else ""
        flops = f"{si(r.flops)} flop, {si(r.flop_rate or 0.0, 'FLOP/s')}" \
            if r.flops is not None else "flops unknown"
        detail = (f"{r.us:.2f} us{est}, {r.hbm_bytes:,} bytes, {si(r.bandwidth, 'B/s')} = "
                  f"{r.floor_fraction(roofs):.0%} of the copy floor, {flops}{kind}")
        points.append(RooflinePoint(r.name, r.intensity, r.bandwidth, detail))
    return points


def write_roofline(path: str, rows: Sequence[ProfileRow], roofs: Roofs, target: str,
                   title: str) -> None:
    """The SVG of `rows`, written through a temporary file and renamed."""
    from fusec.compiler.outputs import write_text_atomically

    svg = roofline_svg(roofline_points(rows, roofs),
                       Roof(roofs.copy_bandwidth,
                            f"copy {si(roofs.copy_bandwidth, 'B/s')} (measured)"),
                       Roof(roofs.compute, f"compute {si(roofs.compute, 'FLOP/s')} "
                                           f"(target {target})"),
                       title)
    write_text_atomically(path, svg)
