"""Launch grids stay within CUDA's limits (issue 10 item 6): a batched matmul
of 65536 batch entries, a conv, a pool, a conv + pool over 70000 images and a
batched transpose put their batch on grid z, which holds at most 65535
blocks. Every emitter that uses y or z loops over it, and `fit_grid` clamps
the launch to the target's limits (`codegen/launch_grid.py`).

Big shapes are compiled only; the folded path also runs in the simulator on
tiny shapes, with `max_grid_yz` lowered to 2 in the target profile (and in
the limits the emitters write for)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fusec.analysis.program import Program
from fusec.analysis.targets import H200, Target
from fusec.codegen import launch_grid
from fusec.codegen.generate import generate_program
from fusec.codegen.kernel_source import KernelSource
from fusec.codegen.launch_grid import fit_grid, grid_limits
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.compiler.verify import verify_module
from fusec.reference.interpreter import find_function, random_inputs, run_module
from fusec.runtime.executor import run_program
from tests.codegen_harness import tensor

PIPELINES = {
    "fused": "decompose,form-fusion-groups,group-each-op,register-budget,tile-and-promote",
    "unfused": "decompose,group-each-op,register-budget,tile-and-promote",
}


BATCHED_OPS = {"nn.matmul", "nn.transpose", "nn.conv2d", "nn.max_pool2d", "nn.avg_pool2d"}


def _program(batch: int, images: int, rows: int = 4) -> str:
    """A batched matmul, a batched transpose, conv + pool, a lone conv and a
    lone pool (the matmul's M = `rows`, its tiles on grid y)."""
    a, b, mm = (batch, rows, 3), (batch, 3, 2), (batch, rows, 2)
    t_in, t_out = (batch, 40, 33), (batch, 33, 40)
    x, w = (images, 2, 4, 4), (3, 2, 1, 1)
    y, p = (images, 3, 4, 4), (images, 3, 2, 2)
    return f"""
func.func @f(%a: {tensor(a)}, %b: {tensor(b)}, %t: {tensor(t_in)}, %x: {tensor(x)},
             %w: {tensor(w)}) -> ({tensor(mm)}, {tensor(t_out)}, {tensor(p)}, {tensor(y)},
                                  {tensor(p)}) {{
  %m = nn.matmul %a, %b : ({tensor(a)}, {tensor(b)}) -> {tensor(mm)}
  %tt = nn.transpose %t {{perm = [0, 2, 1]}} : ({tensor(t_in)}) -> {tensor(t_out)}
  %c = nn.conv2d %x, %w : ({tensor(x)}, {tensor(w)}) -> {tensor(y)}
  %r = nn.relu %c : {tensor(y)}
  %q = nn.max_pool2d %r {{kernel = [2, 2], strides = [2, 2]}} : ({tensor(y)}) -> {tensor(p)}
  %n = nn.neg %x : {tensor(x)}
  %c2 = nn.conv2d %n, %w : ({tensor(x)}, {tensor(w)}) -> {tensor(y)}
  %e = nn.exp %c2 : {tensor(y)}
  %p2 = nn.avg_pool2d %e {{kernel = [2, 2], strides = [2, 2]}} : ({tensor(y)}) -> {tensor(p)}
  func.return %m, %tt, %q, %c2, %p2 : {tensor(mm)}, {tensor(t_out)}, {tensor(p)}, {tensor(y)},
      {tensor(p)}
}}"""


def _compile(text: str, pipeline: str, target: Target) -> Program:
    ctx = make_context()
    module = parse_module(ctx, text, "grid.mlir")
    verify_module(module)
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), pipeline)).run(module)
    return generate_program(module, target)


def _kinds(program: Program) -> str:
    """The kernels' header lines: which emitter wrote each."""
    return "\n".join(line for line in program.kernels_source.splitlines()
                     if line.startswith("# g") or line.startswith("# launch"))


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_big_batches_launch_within_the_limits(pipeline: str) -> None:
    program = _compile(_program(64 * 1024, 70000), PIPELINES[pipeline], H200)
    launches = program.functions["f"].launches
    limits = grid_limits(H200)
    for launch in launches:
        assert all(1 <= n <= limit for n, limit in zip(launch.grid, limits, strict=True)), \
            (launch.kernel, launch.grid)
    # the matmul, the transpose and every window kernel put the batch on z
    # (pointwise kernels use grid x only)
    batched = [la for la in launches if set(la.ops) & BATCHED_OPS]
    assert len(batched) >= 5, _kinds(program)
    assert all(la.grid[2] == H200.max_grid_yz for la in batched), _kinds(program)
    assert "clamped to the limits of h200" in program.kernels_source


TINY = dataclasses.replace(H200, name="tiny-grid", max_grid_yz=2)


@pytest.mark.parametrize("pipeline", PIPELINES)
def test_folded_grids_compute_every_block_in_the_simulator(
        pipeline: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch_grid, "EMIT_LIMITS", grid_limits(TINY))
    text = _program(batch=3, images=3, rows=80)
    program = _compile(text, PIPELINES[pipeline], TINY)
    launches = program.functions["f"].launches
    assert all(la.grid[1] <= 2 and la.grid[2] <= 2 for la in launches), _kinds(program)
    # y folded too: the matmul's M tiles, the transpose's row tiles, channels
    assert sum(la.grid[1] == 2 for la in launches) >= 3, _kinds(program)
    reference = parse_module(make_context(), text, "grid.mlir")
    inputs = random_inputs(find_function(reference, "f"), 2)
    expected = run_module(reference, inputs, "f")
    got = run_program(program, "f", inputs, device="sim")
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5, err_msg=program.kernels_source)


def test_a_grid_over_the_limit_without_a_loop_is_an_internal_error() -> None:
    kernel = KernelSource("k", "# launch: grid (1, 1, 3) x block (1, 1, 1)\n", (1, 1, 3),
                          (1, 1, 1), [])
    with pytest.raises(RuntimeError, match="does not loop over z"):
        fit_grid(kernel, TINY)
    with pytest.raises(RuntimeError, match="empty grid"):
        fit_grid(dataclasses.replace(kernel, grid=(0, 1, 1)), TINY)
    looped = fit_grid(dataclasses.replace(kernel, grid_loops=frozenset("z")), TINY)
    assert looped.grid == (1, 1, 2)
    assert looped.text.startswith("# launch: grid (1, 1, 2) x block (1, 1, 1)\n# grid (1, 1, 3)")


@pytest.mark.gpu
def test_big_batches_run_on_the_gpu() -> None:
    # 65536 matmuls and transposes, 70000 images: grid z clamped to 65535
    text = _program(64 * 1024, 70000)
    program = _compile(text, PIPELINES["fused"], H200)
    reference = parse_module(make_context(), text, "grid.mlir")
    inputs = random_inputs(find_function(reference, "f"), 3)
    expected = run_module(reference, inputs, "f")
    got = run_program(program, "f", inputs, device="gpu")
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_grids_that_fit_need_no_loop() -> None:
    # the loop costs registers: only where the grid needs it
    program = _compile(_program(batch=3, images=3, rows=80), PIPELINES["fused"], H200)
    assert "cuda.gridDim.y" not in program.kernels_source
    assert "cuda.gridDim.z" not in program.kernels_source
    assert "clamped" not in program.kernels_source


@pytest.mark.parametrize(("block", "cap", "want"), [
    ((256, 1, 1), 0, 0),  # 255 registers fit: no declaration
    ((128, 2, 1), 40, 40),  # --max-registers alone
    ((512, 1, 1), 0, 128),
    ((32, 32, 1), 0, 64),
    ((512, 1, 1), 96, 96),  # the lower of the two
    ((384, 1, 1), 0, 168),  # 65536 / 384 = 170.7, in whole units of 8
])
def test_blocks_over_256_threads_declare_the_registers_they_can_launch_with(
        block: tuple[int, int, int], cap: int, want: int) -> None:
    # A 512-thread attention block that ptxas gave more than 128 registers was
    # refused at launch (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES) on the H200.
    from fusec.codegen.kernel_source import capped
    from fusec.codegen.launch_grid import launch_register_cap

    kernel = KernelSource("k", "@cuda.jit\ndef k(x):\n    pass\n", (1, 1, 1), block, [])
    assert launch_register_cap(kernel, H200, cap) == want
    text = capped(kernel, want).text
    assert (f"max_registers={want}" in text) == (want > 0)
