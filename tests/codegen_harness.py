"""Shared by the reduction, contraction and window code generation tests:
compile a small program, run it in numba's CUDA simulator and compare every
output with the reference interpreter (float64), asserting the launch count.

Programs are either plain `nn` ops (run through a pipeline such as
`group-each-op`) or hand-written `fusion.group`s (no pipeline), so a test can
pin exactly which ops share one kernel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from fusec.analysis.program import Program
from fusec.analysis.schedule_choice import ensure_schedules
from fusec.analysis.targets import H200, Target
from fusec.codegen.generate import generate_program
from fusec.codegen.kernel_source import KernelSource
from fusec.codegen.writers import WriteTask, writer_for
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.compiler.verify import verify_module
from fusec.dialects.fusion import GroupOp
from fusec.reference.interpreter import find_function, random_inputs, run_module
from fusec.runtime.executor import run_program
from fusec.scheduling.group_plan import group_plan

# float32 kernels against the float64 oracle; sums of a few hundred terms and
# transcendental functions lose a few ulps more than a single op.
RTOL = 1e-4
ATOL = 1e-5


def compile_text(text: str, pipeline: str | None) -> Program:
    """Parse, verify, run `pipeline` (if any), generate."""
    ctx = make_context()
    module = parse_module(ctx, text, "test.mlir")
    verify_module(module)
    if pipeline:
        PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), pipeline)).run(module)
    return generate_program(module)


def emit_scheduled(group: GroupOp, target: Target = H200) -> KernelSource:
    """The kernel of `group` named "k", written by its writer from its plan
    after the scheduler recorded its schedule for `target` (as code
    generation does for an unscheduled group)."""
    ensure_schedules([group], target)
    with group_plan(group, target) as plan:
        written = writer_for(group).write(WriteTask(plan, "k", "g0", lambda v, _op: "v", target))
    assert isinstance(written, KernelSource)
    return written


def check_program(
    text: str,
    launches: int = 1,
    pipeline: str | None = None,
    seed: int = 0,
    rtol: float = RTOL,
    atol: float = ATOL,
    tolerance: dict[str, float] | None = None,
    relative_to_max: bool = False,
) -> Program:
    """Compile `text`, run `@f` in the simulator, compare with the reference
    and assert the launch count (printing the kernels when it is off).
    `tolerance` maps an output dtype name to one bound used as rtol and atol;
    with `relative_to_max`, the bound is of the error relative to the
    output's largest reference magnitude (`fusec run --check`'s measure),
    for programs whose outputs cancel (a difference of two rounded values
    is small where its error is not)."""
    program = compile_text(text, pipeline)
    fp = program.functions["f"]
    assert len(fp.launches) == launches, program.kernels_source
    reference = parse_module(make_context(), text, "test.mlir")
    inputs = random_inputs(find_function(reference, "f"), seed)
    expected = run_module(reference, inputs, "f")
    got = run_program(program, "f", inputs, device="sim")
    assert len(got) == len(expected)
    for e, g in zip(expected, got, strict=True):
        assert g.shape == e.shape, program.kernels_source
        if g.dtype.kind == "f":
            if tolerance is not None:  # one bound per output dtype, as rtol and atol
                rtol = atol = tolerance[g.dtype.name]
            if relative_to_max:
                atol, rtol = atol * max(1.0, float(np.abs(e).max())), 0.0
            np.testing.assert_allclose(
                g, e.astype(g.dtype), rtol=rtol, atol=atol, err_msg=program.kernels_source
            )
        else:
            np.testing.assert_array_equal(g, e, err_msg=program.kernels_source)
    return program


def tensor(shape: tuple[int, ...], dtype: str = "f32") -> str:
    """`tensor<4x8xf32>` for a shape."""
    return "tensor<" + "".join(f"{d}x" for d in shape) + dtype + ">"


def one_element_in(a: np.ndarray) -> Any:
    """A device array (numba's simulator) holding `a`, one element into its
    buffer: not 16-byte aligned for 2- and 4-byte elements, the view of a
    caller's `x[1:]` that the runtime must copy before a kernel reads it
    (`runtime/array_alignment.py`)."""
    from numba import cuda

    flat = np.concatenate([np.zeros(1, a.dtype), a.ravel()])
    view = cuda.to_device(flat)[1:].reshape(a.shape)
    assert view._ary.ctypes.data % 16, "the view must be misaligned"
    return view


def run_one_element_in(out: Path, inputs: list[np.ndarray]) -> np.ndarray:
    """The one result of OUT's one function (numba's simulator, through the
    runtime) on `inputs`, each passed `one_element_in` its buffer."""
    from fusec.runtime.compiled_model import read_out
    from fusec.runtime.executor import run_program

    program, _, _ = read_out(out)
    (name,) = program.functions
    (got,) = run_program(program, name, [one_element_in(a) for a in inputs])
    return np.asarray(got.copy_to_host())
