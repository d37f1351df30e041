"""What code generation hands to the runtime: kernel source plus, per entry
function, the ordered launches and the values they read and write.

This is the contract between `codegen/` (which fills it) and the output
writer / runtime (which store it as `kernels.py` + `plan.json` and execute
it). Everything is static: shapes are known at compile time, so a launch
carries its final grid and block.

Values are named by string ids (`"v0"`, `"v1"`, ...) unique within a function.
Every kernel takes its arguments as device arrays in the order of
`KernelLaunch.args`; each argument is passed as a contiguous view of the
value's buffer with the shape `ArgSpec.view_shape` (so a kernel may ask for a
flat `[n]` or a vectorized `[n/4, 4]` view of an n-d tensor).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fusec.analysis.targets import DEFAULT_TARGET, TARGETS, Target


@dataclass(frozen=True)
class TensorSpec:
    """A statically shaped tensor value."""

    shape: tuple[int, ...]
    dtype: str  # NumPy dtype name: "float32", "float16", "float64", "bool", "int32", "int64"

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class ArgSpec:
    """One kernel argument: a value, the view it is passed as, and whether the
    kernel writes it (a workspace a split's second kernel only reads: false)."""

    value: str
    view_shape: tuple[int, ...]
    writes: bool


@dataclass
class KernelLaunch:
    """One launch of one kernel of `kernels.py`, in program order."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    args: list[ArgSpec]
    ops: list[str]  # op names of the group, e.g. ["nn.mul", "nn.add"]
    group: str  # the group's name in model.mlir (its `name` attribute)
    est_registers: int = 0
    est_time_us: float = 0.0
    hbm_bytes: int = 0
    plan: dict[str, Any] | None = None
    """The stored form of the group's plan (`scheduling/group_plan.GroupPlan.stored`):
    `{"kind": "reduction", "backend": "numba", "schedule": {"layout": "row", ...}}`;
    a split run as one launch has `"parts"`, one such form per group."""
    library: dict[str, Any] | None = None
    """A library call instead of a kernel of kernels.py (`codegen/library_gemm.py`):
    `{"library": "cublas_sgemm", "a": "v0", "b": "v1", "c": "v2", "transpose_a":
    false, "transpose_b": false, "batch": [], "m": 64, "n": 64, "k": 64}`."""


@dataclass
class View:
    """A value that aliases another value's buffer (a reshape of a contiguous
    tensor costs no kernel)."""

    value: str
    source: str


@dataclass
class FunctionProgram:
    """One entry function."""

    name: str
    inputs: list[str]  # value ids of the arguments, in order
    input_names: list[str]  # the argument names from the model (for messages, npz keys)
    outputs: list[str]  # value ids returned, in order
    values: dict[str, TensorSpec]
    launches: list[KernelLaunch]
    views: list[View] = field(default_factory=list[View])
    constants: dict[str, np.ndarray] = field(default_factory=dict[str, np.ndarray])
    # Per integer input (value id): the exclusive bound its random values are
    # drawn below when kernels are timed (`reference.interpreter.index_bounds`:
    # the smallest table a gather it indexes reads), so a timed gather reads
    # scattered rows, as real indices make it. Not in plan.json.
    index_bounds: dict[str, int] = field(default_factory=dict[str, int])


@dataclass
class Program:
    """The whole compiled model."""

    kernels_source: str  # the text of kernels.py
    functions: dict[str, FunctionProgram]
    target: Target = TARGETS[DEFAULT_TARGET]
    """The profile the program was generated for: what `--ptx-info` and
    `--save-kernels` compile for without a GPU. A program read back from
    plan.json keeps the default: the runtime compiles for the device present."""
