"""Launch grids within the target's limits.

CUDA launches at most `Target.max_grid_x` blocks along grid x (2**31 - 1) and
`Target.max_grid_yz` along y and along z (65535). An emitter that puts a
dimension that can grow past that on y or z (a matmul's batch, a conv's
images or output channels) takes its block coordinate from
`block_index_lines`: `bz = cuda.blockIdx.z` while the extent fits, a
grid-stride loop past it (listed in `KernelSource.grid_loops`):

```python
bz = cuda.blockIdx.z  # launched with z = 65535
while bz < 65536:
    ...
    bz += cuda.gridDim.z
```

The loop costs registers (a 16x16 GEMM tile: 64 -> 96 per ptxas), so it is
written only where the grid needs it. Every generated kernel passes through
`fit_grid` (`codegen/generate.py`), which clamps looping axes to the limit;
an axis over the limit that the kernel does not loop over is an internal
error, never a launch the driver refuses or one that silently skips work.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from fusec.analysis.targets import DEFAULT_TARGET, Target, get_target
from fusec.codegen.kernel_source import KernelSource, int_literal

GRID_AXES = ("x", "y", "z")


def grid_limits(target: Target) -> tuple[int, int, int]:
    """The most blocks along x, y and z a launch on `target` may have."""
    return target.max_grid_x, target.max_grid_yz, target.max_grid_yz


# The limits emitters write kernels for: every profile has CUDA's, and
# `fit_grid` checks each launch against its own target's (tests may lower
# these to run the loops on tiny shapes).
EMIT_LIMITS = grid_limits(get_target(DEFAULT_TARGET))


def block_index_lines(loops: Sequence[tuple[str, str, int]], body: list[str],
                      reuses_shared: bool = False) -> tuple[list[str], frozenset[str]]:
    """`body` with block coordinate `var` set for each `(var, axis, extent)`,
    outermost first: `var = cuda.blockIdx.<axis>`, and where `extent` passes
    `EMIT_LIMITS` a grid-stride loop over it. With `reuses_shared`, a loop's
    trip ends at a barrier: the next trip overwrites shared tiles that other
    threads may still read. Returns the lines and the axes that loop."""
    looped = {axis for _, axis, extent in loops if extent > EMIT_LIMITS[GRID_AXES.index(axis)]}
    barrier = ["cuda.syncthreads()  # the next trip reuses the shared tiles"]
    inner = [*body, *barrier] if reuses_shared and looped else body
    for var, axis, extent in reversed(loops):
        if axis in looped:
            inner = [f"{var} = cuda.blockIdx.{axis}", f"while {var} < {int_literal(extent)}:",
                     *("    " + line for line in inner), f"    {var} += cuda.gridDim.{axis}"]
        else:
            inner = [f"{var} = cuda.blockIdx.{axis}", *inner]
    return inner, frozenset(looped)


def fit_grid(kernel: KernelSource, target: Target) -> KernelSource:
    """`kernel` with its grid clamped to `target`'s limits along the axes it
    loops over (its header's launch line updated); raises `RuntimeError`
    for an empty grid or an axis over the limit without a loop."""
    fitted: list[int] = []
    for axis, blocks, limit in zip(GRID_AXES, kernel.grid, grid_limits(target), strict=True):
        if blocks < 1:
            raise RuntimeError(f"kernel {kernel.name!r} has an empty grid {kernel.grid}")
        if blocks > limit and axis not in kernel.grid_loops:
            raise RuntimeError(
                f"kernel {kernel.name!r} asks for grid {kernel.grid}, over {target.name}'s limit "
                f"of {limit} blocks along {axis}, and does not loop over {axis}")
        fitted.append(min(blocks, limit))
    grid = (fitted[0], fitted[1], fitted[2])
    if grid == kernel.grid:
        return kernel
    old, new = f"# launch: grid {kernel.grid} x", f"# launch: grid {grid} x"
    note = f"grid {kernel.grid} clamped to the limits of {target.name}: blocks loop over the rest"
    lines = kernel.text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith(old):
            lines[i: i + 1] = [new + line[len(old):], f"# {note}"]
            break
    return dataclasses.replace(kernel, grid=grid, text="\n".join(lines),
                               notes=[*kernel.notes, note])


REGISTER_UNIT = 8  # registers are allocated to a thread in multiples of 8


def launch_register_cap(kernel: KernelSource, target: Target, cap: int = 0) -> int:
    """The `max_registers` to declare `kernel` with: `cap` (`--max-registers`,
    0: none), lowered to what one block of its threads can hold on an SM.
    Without it a block of more than 256 threads whose kernel ptxas gives more
    registers than `registers_per_sm / threads` is refused at launch
    (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES); with it, ptxas fits the kernel
    (spilling if it must). 0 when neither limits the kernel."""
    threads = max(1, kernel.block[0] * kernel.block[1] * kernel.block[2])
    fits = target.registers_per_sm // threads // REGISTER_UNIT * REGISTER_UNIT
    if fits >= target.max_registers_per_thread:
        return cap
    return min(cap, fits) if cap > 0 else fits
