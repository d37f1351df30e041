"""Launch grids within the target's limits.

CUDA launches at most `Target.max_grid_x` blocks along grid x (2**31 - 1) and
`Target.max_grid_yz` along y and along z (65535). An emitter that puts a
dimension that can grow past that on y or z (a matmul's batch, a conv's
images or output channels) walks it with a grid-stride loop
(`grid_stride_loops`) and lists the axis in `KernelSource.grid_loops`:

```python
for bz in range(cuda.blockIdx.z, 65536, cuda.gridDim.z):  # launched with z = 65535
    ...
```

Every generated kernel passes through `fit_grid` (`codegen/generate.py`),
which clamps such axes to the limit; an axis over the limit that the kernel
does not loop over is an internal error, never a launch the driver refuses
or one that silently skips work.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from fusec.codegen.kernel_source import KernelSource, int_literal
from fusec.compiler.targets import Target

GRID_AXES = ("x", "y", "z")


def grid_limits(target: Target) -> tuple[int, int, int]:
    """The most blocks along x, y and z a launch on `target` may have."""
    return target.max_grid_x, target.max_grid_yz, target.max_grid_yz


def grid_stride_loops(loops: Sequence[tuple[str, str, int]], body: list[str],
                      reuses_shared: bool = False) -> list[str]:
    """`body` inside `for <var> in range(cuda.blockIdx.<axis>, <extent>,
    cuda.gridDim.<axis>):` for each `(var, axis, extent)`, outermost first.
    With `reuses_shared`, each trip ends at a barrier: the next one
    overwrites shared tiles that other threads may still be reading."""
    inner = [*body, "cuda.syncthreads()  # the next trip reuses the shared tiles"] \
        if reuses_shared else body
    for var, axis, extent in reversed(loops):
        header = (f"for {var} in range(cuda.blockIdx.{axis}, {int_literal(extent)}, "
                  f"cuda.gridDim.{axis}):")
        inner = [header, *("    " + line for line in inner)]
    return inner


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
