"""Every candidate schedule the autotuner may time computes the right numbers:
for small programs of each group kind, each candidate of each group is forced
in turn, run in numba's CUDA simulator and compared with the reference
interpreter (fresh random inputs)."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from fusec.analysis.targets import H200
from fusec.codegen.generate import generate_program
from fusec.compiler.compile_pipeline import PipelineOptions, default_pipeline
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import SCHEDULE_KEY
from fusec.reference.interpreter import find_function, random_inputs, run_module
from fusec.runtime.executor import run_program
from fusec.scheduling.candidates import candidates

ALL = 64  # more than any group has: every candidate

PROGRAMS: dict[str, str] = {
    "pointwise_broadcast": """
func.func @f(%x: tensor<3x40xf32>, %b: tensor<40xf32>) -> tensor<3x40xf32> {
  %y = nn.add %x, %b : (tensor<3x40xf32>, tensor<40xf32>) -> tensor<3x40xf32>
  %z = nn.tanh %y : tensor<3x40xf32>
  func.return %z : tensor<3x40xf32>
}""",
    "row_reduction": """
func.func @f(%x: tensor<3x70xf32>) -> tensor<3xf32> {
  %e = nn.exp %x : tensor<3x70xf32>
  %s = nn.reduce_sum %e {axes = [1]} : (tensor<3x70xf32>) -> tensor<3xf32>
  func.return %s : tensor<3xf32>
}""",
    "column_reduction": """
func.func @f(%x: tensor<37x5xf32>) -> tensor<5xf32> {
  %s = nn.reduce_sum %x {axes = [0]} : (tensor<37x5xf32>) -> tensor<5xf32>
  func.return %s : tensor<5xf32>
}""",
    "softmax": """
func.func @f(%x: tensor<2x45xf32>) -> tensor<2x45xf32> {
  %y = nn.softmax %x {axis = 1} : tensor<2x45xf32>
  func.return %y : tensor<2x45xf32>
}""",
    "matmul_epilogue": """
func.func @f(%a: tensor<9x12xf32>, %b: tensor<12x10xf32>, %c: tensor<10xf32>)
    -> tensor<9x10xf32> {
  %m = nn.matmul %a, %b : (tensor<9x12xf32>, tensor<12x10xf32>) -> tensor<9x10xf32>
  %y = nn.add %m, %c : (tensor<9x10xf32>, tensor<10xf32>) -> tensor<9x10xf32>
  %r = nn.relu %y : tensor<9x10xf32>
  func.return %r : tensor<9x10xf32>
}""",
    "conv_relu": """
func.func @f(%x: tensor<1x3x6x6xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  %c = nn.conv2d %x, %w {pads = [1, 1, 1, 1]}
      : (tensor<1x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  %r = nn.relu %c : tensor<1x4x6x6xf32>
  func.return %r : tensor<1x4x6x6xf32>
}""",
    "transposed_f32": """
func.func @f(%x: tensor<5x37x19xf32>, %b: tensor<19x1xf32>) -> tensor<37x19x5xf32> {
  %t = nn.transpose %x {perm = [1, 2, 0]} : (tensor<5x37x19xf32>) -> tensor<37x19x5xf32>
  %y = nn.add %t, %b : (tensor<37x19x5xf32>, tensor<19x1xf32>) -> tensor<37x19x5xf32>
  func.return %y : tensor<37x19x5xf32>
}""",
    "transposed_f16": """
func.func @f(%x: tensor<3x40x70xf16>) -> tensor<70x3x40xf16> {
  %t = nn.transpose %x {perm = [2, 0, 1]} : (tensor<3x40x70xf16>) -> tensor<70x3x40xf16>
  %r = nn.relu %t : tensor<70x3x40xf16>
  func.return %r : tensor<70x3x40xf16>
}""",
    "depthwise_strided": """
func.func @f(%x: tensor<1x2x21x7xf32>, %w: tensor<2x1x3x3xf32>) -> tensor<1x2x11x4xf32> {
  %s = nn.silu %x : tensor<1x2x21x7xf32>
  %c = nn.conv2d %s, %w {strides = [2, 2], pads = [1, 1, 1, 1], groups = 2}
      : (tensor<1x2x21x7xf32>, tensor<2x1x3x3xf32>) -> tensor<1x2x11x4xf32>
  func.return %c : tensor<1x2x11x4xf32>
}""",
    "pool": """
func.func @f(%x: tensor<1x2x6x6xf32>) -> tensor<1x2x3x3xf32> {
  %p = nn.max_pool2d %x {kernel = [2, 2], strides = [2, 2]}
      : (tensor<1x2x6x6xf32>) -> tensor<1x2x3x3xf32>
  func.return %p : tensor<1x2x3x3xf32>
}""",
}


def compiled(text: str) -> ModuleOp:
    """`text` through the compile job's default pipeline for h200 (library
    GEMMs off: fusec's own kernel is what the tuner times)."""
    from fusec.compiler.compile_pipeline import ScheduleOptions

    ctx = make_context()
    module = parse_module(ctx, text, "test.mlir")
    registry = make_registry([])
    spec = default_pipeline(registry, PipelineOptions(
        target="h200", schedule=ScheduleOptions(gemm="fused")))
    PipelineRunner(ctx, parse_pipeline_spec(registry, spec)).run(module)
    return module


SLOW_PROGRAMS = ("row_reduction", "conv_relu", "transposed_f32", "transposed_f16",
                 "depthwise_strided")
"""The most candidates (a transposed tile up to 1024 threads a block, a depthwise
window's taller tiles): the slow set runs them."""


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_PROGRAMS
                                  else n for n in PROGRAMS])
def test_every_candidate_is_correct(name: str) -> None:
    text = PROGRAMS[name]
    module = compiled(text)
    reference = parse_module(make_context(), text, "test.mlir")
    inputs = random_inputs(find_function(reference, "f"), seed=len(name))
    expected = run_module(reference, inputs, "f")
    groups = [g for g in module.walk() if isinstance(g, GroupOp)]
    tried = 0
    for index, group in enumerate(groups):
        for cand in candidates(group, H200, H200.shared_memory_per_block, ALL):
            trial = module.clone()
            target_group = [g for g in trial.walk() if isinstance(g, GroupOp)][index]
            target_group.attributes[SCHEDULE_KEY] = cand
            program = generate_program(trial, H200)
            got = run_program(program, "f", inputs, device="sim")
            for e, g in zip(expected, got, strict=True):
                np.testing.assert_allclose(g, e.astype(g.dtype), rtol=1e-4, atol=1e-5,
                                           err_msg=f"{cand}\n{program.kernels_source}")
            tried += 1
    assert tried > len(groups), "no group of this program has an alternative schedule"


def test_a_narrow_depthwise_window_is_offered_deeper_tiles() -> None:
    """A block stages its whole halo tile before computing, so on a narrow
    image the autotuner may time taller tiles (more rows per block) than
    the model's: `window_schedule.deeper_plans`."""
    module = compiled(PROGRAMS["depthwise_strided"])
    group = next(g for g in module.walk() if isinstance(g, GroupOp))
    first, *others = candidates(group, H200, H200.shared_memory_per_block, ALL)
    th = first.int_field("th")
    deeper = [c for c in others if c.int_field("th") > th]
    assert deeper, [str(c) for c in others]
    assert all(c.int_field("th") % c.int_field("pt") == 0 for c in deeper)
