"""Matmul kernels in numba's CUDA simulator against the reference interpreter:
sizes that are not multiples of the tile, broadcast batch dimensions, and
epilogues (bias + gelu, residual add) fused into ONE kernel; plus a check
that the large-tile kernel compiles for Hopper without spilling."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.targets import H200
from fusec.codegen.contraction import (
    LARGE_TILE,
    MEDIUM_TILE,
    SMALL_TILE,
    GemmTile,
)
from fusec.codegen.kernel_source import KERNEL_PRELUDE, KernelSource
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import SCHEDULE_KEY
from fusec.dialects.shapes import matmul_shape
from fusec.scheduling.contraction_schedule import choose_tile, tile_attr
from tests.codegen_harness import check_program, emit_scheduled, tensor


def _matmul_program(a: tuple[int, ...], b: tuple[int, ...]) -> str:
    out = tensor(matmul_shape(a, b))
    return f"""
func.func @f(%a: {tensor(a)}, %b: {tensor(b)}) -> {out} {{
  %y = nn.matmul %a, %b : ({tensor(a)}, {tensor(b)}) -> {out}
  func.return %y : {out}
}}"""


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ((20, 28), (28, 24)),  # nothing a multiple of the 32x32x8 tile
        ((33, 9), (9, 40)),  # two tiles along M and N, one partial K tile
        ((3, 5, 12), (12, 7)),  # rank 3 x rank 2
        ((2, 1, 5, 6), (3, 6, 7)),  # 4-D, both batch dimensions broadcast
        ((1, 16), (16, 1)),  # vector-like
    ],
)
def test_matmul(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    check_program(_matmul_program(a, b), pipeline="group-each-op")


MLP = """
func.func @f(%x: tensor<20x28xf32>, %w: tensor<28x24xf32>, %b: tensor<24xf32>,
             %r: tensor<20x24xf32>)
    -> (tensor<20x24xf32>, tensor<20x24xf32>) {
  %y, %m = fusion.group (%x, %w, %b, %r) {name = "g0", kind = "contraction"}
      : (tensor<20x28xf32>, tensor<28x24xf32>, tensor<24xf32>, tensor<20x24xf32>)
      -> (tensor<20x24xf32>, tensor<20x24xf32>) {
  ^bb0(%xa: tensor<20x28xf32>, %wa: tensor<28x24xf32>, %ba: tensor<24xf32>, %ra: tensor<20x24xf32>):
    %mm = nn.matmul %xa, %wa : (tensor<20x28xf32>, tensor<28x24xf32>) -> tensor<20x24xf32>
    %s = nn.add %mm, %ba : (tensor<20x24xf32>, tensor<24xf32>) -> tensor<20x24xf32>
    %g = nn.gelu %s : tensor<20x24xf32>
    %h = nn.add %g, %ra : (tensor<20x24xf32>, tensor<20x24xf32>) -> tensor<20x24xf32>
    fusion.yield %h, %mm : tensor<20x24xf32>, tensor<20x24xf32>
  }
  func.return %y, %m : tensor<20x24xf32>, tensor<20x24xf32>
}"""


def test_bias_gelu_residual_epilogue_one_kernel() -> None:
    check_program(MLP)


def test_batched_scale_epilogue() -> None:
    text = """
func.func @f(%q: tensor<2x6x8xf32>, %k: tensor<2x8x6xf32>) -> tensor<2x6x6xf32> {
  %y = fusion.group (%q, %k) {name = "g0", kind = "contraction"}
      : (tensor<2x6x8xf32>, tensor<2x8x6xf32>) -> tensor<2x6x6xf32> {
  ^bb0(%qa: tensor<2x6x8xf32>, %ka: tensor<2x8x6xf32>):
    %s = nn.matmul %qa, %ka : (tensor<2x6x8xf32>, tensor<2x8x6xf32>) -> tensor<2x6x6xf32>
    %c = nn.constant dense<0.125> : tensor<f32>
    %y0 = nn.mul %s, %c : (tensor<2x6x6xf32>, tensor<f32>) -> tensor<2x6x6xf32>
    fusion.yield %y0 : tensor<2x6x6xf32>
  }
  func.return %y : tensor<2x6x6xf32>
}"""
    check_program(text)


def _group(text: str) -> GroupOp:
    module = parse_module(make_context(), text, "test.mlir")
    return next(op for op in module.walk() if isinstance(op, GroupOp))


def _emit_tiled(group: GroupOp, tile: GemmTile) -> KernelSource:
    """The kernel of `group` under a schedule of `tile`."""
    group.attributes[SCHEDULE_KEY] = tile_attr(tile)
    return emit_scheduled(group)


@pytest.mark.parametrize("tile", [LARGE_TILE, MEDIUM_TILE])
def test_bigger_tiles_in_the_simulator(tile: GemmTile) -> None:
    # One block over a 20x24 product: every guard of the tile.
    kernel = _emit_tiled(_group(MLP), tile)
    assert kernel.block == (256, 1, 1)
    _run_alone(kernel.text, "k", MLP, kernel.grid, kernel.block)


def _run_alone(text: str, name: str, program: str, grid: tuple[int, int, int],
               block: tuple[int, int, int]) -> None:
    """Run one kernel text on the program's random inputs and compare."""
    import numpy as np

    from fusec.reference.interpreter import find_function, random_inputs, run_module
    from fusec.runtime.executor import load_kernels

    module = parse_module(make_context(), program, "test.mlir")
    inputs = [a.astype(np.float32).ravel() for a in random_inputs(find_function(module), 0)]
    expected = run_module(module, [a for a in random_inputs(find_function(module), 0)])
    outputs = [np.zeros(e.size, np.float32) for e in expected]
    kernel = getattr(load_kernels(KERNEL_PRELUDE + "\n\n" + text), name)
    kernel[grid, block](*inputs, *outputs)
    for got, want in zip(outputs, expected, strict=True):
        np.testing.assert_allclose(got, want.ravel(), rtol=1e-4, atol=1e-5)


def test_tile_choice() -> None:
    assert choose_tile(1, 4096, 4096, H200) == LARGE_TILE
    assert choose_tile(96, 512, 64, H200) == MEDIUM_TILE  # attention's P @ V
    assert choose_tile(1, 20, 24, H200) == SMALL_TILE


def test_transpose_and_scale_prologue() -> None:
    # ONNX Gemm with transB: the transpose is fused into the operand loads.
    text = """
func.func @f(%x: tensor<2x5x6xf32>, %w: tensor<9x6xf32>, %s: tensor<6xf32>) -> tensor<2x5x9xf32> {
  %y = fusion.group (%x, %w, %s) {name = "g0", kind = "contraction"}
      : (tensor<2x5x6xf32>, tensor<9x6xf32>, tensor<6xf32>) -> tensor<2x5x9xf32> {
  ^bb0(%xa: tensor<2x5x6xf32>, %wa: tensor<9x6xf32>, %sa: tensor<6xf32>):
    %xs = nn.mul %xa, %sa : (tensor<2x5x6xf32>, tensor<6xf32>) -> tensor<2x5x6xf32>
    %wt = nn.transpose %wa {perm = [1, 0]} : (tensor<9x6xf32>) -> tensor<6x9xf32>
    %m = nn.matmul %xs, %wt : (tensor<2x5x6xf32>, tensor<6x9xf32>) -> tensor<2x5x9xf32>
    fusion.yield %m : tensor<2x5x9xf32>
  }
  func.return %y : tensor<2x5x9xf32>
}"""
    check_program(text)


TRANSPOSED = """
func.func @f(%x: tensor<2x6x5xf32>, %k: tensor<2x9x6xf32>) -> tensor<2x5x9xf32> {
  %y = fusion.group (%x, %k) {name = "g0", kind = "contraction"}
      : (tensor<2x6x5xf32>, tensor<2x9x6xf32>) -> tensor<2x5x9xf32> {
  ^bb0(%xa: tensor<2x6x5xf32>, %ka: tensor<2x9x6xf32>):
    %xt = nn.transpose %xa {perm = [0, 2, 1]} : (tensor<2x6x5xf32>) -> tensor<2x5x6xf32>
    %kt = nn.transpose %ka {perm = [0, 2, 1]} : (tensor<2x9x6xf32>) -> tensor<2x6x9xf32>
    %m = nn.matmul %xt, %kt : (tensor<2x5x6xf32>, tensor<2x6x9xf32>) -> tensor<2x5x9xf32>
    fusion.yield %m : tensor<2x5x9xf32>
  }
  func.return %y : tensor<2x5x9xf32>
}"""


@pytest.mark.parametrize("tile", [SMALL_TILE, MEDIUM_TILE, LARGE_TILE])
def test_transposed_operands_are_read_along_their_contiguous_axis(tile: GemmTile) -> None:
    # Both operands are transposed group inputs: loads walk down the tile's rows.
    kernel = _emit_tiled(_group(TRANSPOSED), tile)
    assert "A: transposed, B: transposed" in kernel.text
    _run_alone(kernel.text, "k", TRANSPOSED, kernel.grid, kernel.block)


def test_view_chain_prologue() -> None:
    # Reshapes, slices and transposes folded into the operand loads.
    text = """
func.func @f(%x: tensor<2x3x8xf32>, %w: tensor<5x14xf32>) -> tensor<6x3xf32> {
  %y = fusion.group (%x, %w) {name = "g0", kind = "contraction"}
      : (tensor<2x3x8xf32>, tensor<5x14xf32>) -> tensor<6x3xf32> {
  ^bb0(%xa: tensor<2x3x8xf32>, %wa: tensor<5x14xf32>):
    %xr = nn.reshape %xa : (tensor<2x3x8xf32>) -> tensor<6x8xf32>
    %ws = nn.slice %wa {starts = [0, 1], limits = [5, 14], strides = [1, 3]}
        : (tensor<5x14xf32>) -> tensor<5x5xf32>
    %wr = nn.reshape %ws : (tensor<5x5xf32>) -> tensor<25xf32>
    %wq = nn.slice %wr {starts = [0], limits = [24]} : (tensor<25xf32>) -> tensor<24xf32>
    %wt = nn.reshape %wq : (tensor<24xf32>) -> tensor<3x8xf32>
    %wu = nn.transpose %wt {perm = [1, 0]} : (tensor<3x8xf32>) -> tensor<8x3xf32>
    %m = nn.matmul %xr, %wu : (tensor<6x8xf32>, tensor<8x3xf32>) -> tensor<6x3xf32>
    fusion.yield %m : tensor<6x3xf32>
  }
  func.return %y : tensor<6x3xf32>
}"""
    check_program(text)


def test_prologue_value_used_twice_is_refused() -> None:
    text = """
func.func @f(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %y, %z = fusion.group (%x, %w) {name = "g0", kind = "contraction"}
      : (tensor<4x4xf32>, tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  ^bb0(%xa: tensor<4x4xf32>, %wa: tensor<4x4xf32>):
    %r = nn.relu %xa : tensor<4x4xf32>
    %m = nn.matmul %r, %wa : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    fusion.yield %m, %r : tensor<4x4xf32>, tensor<4x4xf32>
  }
  func.return %y, %z : tensor<4x4xf32>, tensor<4x4xf32>
}"""
    with pytest.raises(FusecError, match=r"feeds nn\.matmul and other ops"):
        emit_scheduled(_group(text))


BIAS = """
func.func @f(%x: tensor<256x256xf32>, %w: tensor<256x256xf32>, %b: tensor<256xf32>)
    -> tensor<256x256xf32> {
  %y = fusion.group (%x, %w, %b) {name = "g0", kind = "contraction"}
      : (tensor<256x256xf32>, tensor<256x256xf32>, tensor<256xf32>) -> tensor<256x256xf32> {
  ^bb0(%xa: tensor<256x256xf32>, %wa: tensor<256x256xf32>, %ba: tensor<256xf32>):
    %mm = nn.matmul %xa, %wa : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
    %s = nn.add %mm, %ba : (tensor<256x256xf32>, tensor<256xf32>) -> tensor<256x256xf32>
    fusion.yield %s : tensor<256x256xf32>
  }
  func.return %y : tensor<256x256xf32>
}"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas")
def test_large_tile_compiles_for_hopper_without_spills(tmp_path: Path) -> None:
    # Accumulators, fragments and prefetch registers must all stay in
    # registers: numba leaves indexed local arrays in (slow) local memory.
    ptx = _hopper_ptx(BIAS)
    path = tmp_path / "k.ptx"
    path.write_text(ptx)
    info = subprocess.run(["ptxas", "-arch=sm_90", "-v", "-o", "/dev/null", str(path)],
                          capture_output=True, text=True, check=True).stderr
    frames = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores", info)
    assert frames and all(f == ("0", "0") for f in frames), info


def _hopper_ptx(program: str) -> str:
    """PTX for compute capability 9.0 of the large-tile kernel (no GPU needed)."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    code = subprocess.run(
        [sys.executable, "-c", _PTX_SCRIPT], input=program, capture_output=True, text=True,
        env=env, check=False,
    )
    if code.returncode != 0:
        pytest.skip(f"cannot compile PTX here: {code.stderr.strip().splitlines()[-1:]}")
    return code.stdout


# Runs in a fresh interpreter: the test session has numba in simulator mode.
_PTX_SCRIPT = """
import sys
from numba import cuda, types
from fusec.codegen.kernel_source import KERNEL_PRELUDE
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.fusion import GroupOp
module = parse_module(make_context(), sys.stdin.read(), "t.mlir")
group = next(op for op in module.walk() if isinstance(op, GroupOp))
from fusec.analysis.targets import H200
from fusec.codegen.contraction import emit
from fusec.dialects.schedule import SCHEDULE_KEY
from fusec.scheduling.contraction_schedule import LARGE_TILE, tile_attr
from fusec.scheduling.group_plan import group_plan
group.attributes[SCHEDULE_KEY] = tile_attr(LARGE_TILE)
with group_plan(group, H200) as plan:
    kernel = emit(plan, "k")
ns = {}
exec(KERNEL_PRELUDE + "\\n" + kernel.text, ns)
arr = types.Array(types.float32, 1, "C")
ptx, _ = cuda.compile_ptx(ns["k"].py_func, (arr,) * len(kernel.params), cc=(9, 0))
sys.stdout.write(ptx)
"""
