"""Transposed operands in pointwise groups (codegen/pointwise_transpose.py):
the transpose joins the pointwise group reading it, and the kernel reads the
operand through a shared-memory tile (a permutation that moves the innermost
axis) or at strided indices (one that keeps it). Each program runs through
the default fusion pipeline in numba's CUDA simulator against the reference
interpreter, as ONE kernel. Shapes are tiny and odd so tile tails are hit.
"""

from __future__ import annotations

import shutil

import codegen_harness as harness
import numpy as np
import pytest

from fusec.analysis.program import Program
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.dialects.fusion import GroupOp
from fusec.dialects.schedule import PointwiseSchedule
from tests.test_half_precision import check as check_half

PIPELINE = "decompose,form-fusion-groups,tile-and-promote"
TOLERANCE = {"float32": 2e-5, "float16": 2e-3, "float64": 1e-12}


def t(shape: tuple[int, ...], dtype: str = "f32") -> str:
    """`tensor<...>` of `shape`."""
    return harness.tensor(shape, dtype)


def permuted(shape: tuple[int, ...], perm: list[int]) -> tuple[int, ...]:
    """The shape of `transpose(x, perm)` for `x` of `shape`."""
    return tuple(shape[p] for p in perm)


def transposed_add(shape: tuple[int, ...], perm: list[int], dtype: str = "f32") -> str:
    """`relu(transpose(x, perm) + y)`."""
    out = permuted(shape, perm)
    tx, to = t(shape, dtype), t(out, dtype)
    return (f"func.func @f(%x: {tx}, %y: {to}) -> {to} {{\n"
            f"  %t = nn.transpose %x {{perm = {perm}}} : ({tx}) -> {to}\n"
            f"  %s = nn.add %t, %y : ({to}, {to}) -> {to}\n"
            f"  %r = nn.relu %s : {to}\n"
            f"  func.return %r : {to}\n}}\n")


def check(text: str) -> Program:
    """One launch, numbers as the reference's."""
    return harness.check_program(text, 1, PIPELINE, tolerance=TOLERANCE)


def scheduled_group(text: str) -> GroupOp:
    """The one group of `text` after the pipeline."""
    ctx = make_context()
    module = parse_module(ctx, text, "test.mlir")
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), PIPELINE)).run(module)
    (group,) = [g for g in module.walk() if isinstance(g, GroupOp)]
    return group


def tile_of(text: str) -> int:
    """The `tile` of the pointwise schedule of the one group of `text`."""
    schedule = scheduled_group(text).attributes["schedule"]
    assert isinstance(schedule, PointwiseSchedule)
    return schedule.int_field("tile")


@pytest.mark.parametrize(("shape", "perm", "tile"), [
    ((33, 47), [1, 0], 32),  # the 2-D transpose, tails on both axes
    ((2, 33, 5), [0, 2, 1], 32),  # batched
    ((2, 5, 5, 7), [0, 2, 3, 1], 32),  # NCHW -> NHWC
    # three channels: a warp of the flat schedule reads x in 3 runs of 10
    # floats, whole sectors, where a tile would be 3 wide (transposed_operands.py)
    ((2, 3, 5, 7), [0, 2, 3, 1], 0),
    ((2, 5, 7, 3), [0, 3, 1, 2], 32),  # NHWC -> NCHW
    ((3, 4, 5), [2, 1, 0], 32),  # innermost to the outermost axis, batch in the middle
    ((3, 5, 7), [1, 0, 2], 0),  # innermost kept: a strided read, flat schedule
])
def test_one_kernel(shape: tuple[int, ...], perm: list[int], tile: int) -> None:
    text = transposed_add(shape, perm)
    assert tile_of(text) == tile
    program = check(text)
    if tile:
        assert "cuda.shared.array(1056, float32)" in program.kernels_source
    if shape == (33, 47):  # the tile load walks x's contiguous axis with threadIdx.x
        assert "in0[uint64(bb_t0 + la + li_0 * uint32(47))]" in program.kernels_source


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_half(dtype: str) -> None:
    text = transposed_add((33, 40), [1, 0], dtype)
    assert tile_of(text) == 32
    # inputs rounded to the half type, the element type's tolerance
    check_half(text, dtype, launches=1, pipeline=PIPELINE)


def test_two_transposed_operands_different_perms() -> None:
    """perm [2, 1, 0] and [2, 0, 1] both put the operand's contiguous axis
    on output axis 0: one tile each, one kernel."""
    a, b, o = t((5, 4, 3)), t((4, 5, 3)), t((3, 4, 5))
    text = (f"func.func @f(%a: {a}, %b: {b}, %y: {o}) -> {o} {{\n"
            f"  %ta = nn.transpose %a {{perm = [2, 1, 0]}} : ({a}) -> {o}\n"
            f"  %tb = nn.transpose %b {{perm = [2, 0, 1]}} : ({b}) -> {o}\n"
            f"  %m = nn.mul %ta, %tb : ({o}, {o}) -> {o}\n"
            f"  %s = nn.sub %m, %y : ({o}, {o}) -> {o}\n"
            f"  func.return %s : {o}\n}}\n")
    program = check(text)
    assert "tile1 = cuda.shared.array" in program.kernels_source


def test_transposed_and_broadcast_operands_multi_output() -> None:
    """A transposed operand, a row and a column broadcast, a scalar, and two
    results (one of them the transposed value itself)."""
    x, o = t((37, 35)), t((35, 37))
    row, col, one = t((37,)), t((35, 1)), t(())
    text = (f"func.func @f(%x: {x}, %r: {row}, %c: {col}, %s: {one}) -> ({o}, {o}) {{\n"
            f"  %t = nn.transpose %x {{perm = [1, 0]}} : ({x}) -> {o}\n"
            f"  %a = nn.add %t, %r : ({o}, {row}) -> {o}\n"
            f"  %b = nn.mul %a, %c : ({o}, {col}) -> {o}\n"
            f"  %e = nn.sub %b, %s : ({o}, {one}) -> {o}\n"
            f"  %n = nn.neg %t : {o}\n"
            f"  %u = nn.add %e, %n : ({o}, {o}) -> {o}\n"
            f"  func.return %u, %t : {o}, {o}\n}}\n")
    assert tile_of(text) == 32
    check(text)


def test_grid_loops_over_batch() -> None:
    """More batch tiles than gridDim.z allows (limit lowered): blocks loop."""
    from fusec.codegen import launch_grid

    limits = launch_grid.EMIT_LIMITS
    launch_grid.EMIT_LIMITS = (limits[0], 2, 2)
    try:
        program = check(transposed_add((5, 33, 3), [0, 2, 1]))
    finally:
        launch_grid.EMIT_LIMITS = limits
    assert "while bz < 5" in program.kernels_source


def test_register_estimate_and_shared_bytes() -> None:
    """The register model and shared-memory estimate read the tile."""
    group = scheduled_group(transposed_add((33, 47), [1, 0]))
    assert group.attributes["shared_bytes_est"].value.data == 32 * 33 * 4  # type: ignore
    assert group.attributes["est_registers"].value.data > 0  # type: ignore


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")
@pytest.mark.slow
def test_register_estimate_within_25_percent_of_ptxas() -> None:
    """The register model's estimate of tiled and flat transposed kernels
    against ptxas (sm_90), at full-size and odd shapes, f32 and halves."""
    from test_register_budget import FULL, assert_estimates, run_pipeline

    from fusec.codegen.generate import generate_program

    cases = [((8192, 8192), [1, 0], "f32"), ((33, 47), [1, 0], "f32"),
             ((8, 64, 56, 56), [0, 2, 3, 1], "f32"), ((3, 5, 8), [1, 0, 2], "f32"),
             ((64, 64), [1, 0], "f16"), ((64, 64), [1, 0], "bf16")]
    text = "\n".join(transposed_add(*c).replace("@f(", f"@f{n}(") for n, c in enumerate(cases))
    assert len(assert_estimates(generate_program(run_pipeline(text, FULL)), "transposed")) == 6


@pytest.mark.gpu
def test_full_size_on_gpu() -> None:
    """bench/programs/transposed_add.mlir at full size: one kernel, numbers
    as NumPy's."""
    from pathlib import Path

    import fusec

    path = Path(__file__).parent.parent / "bench/programs/transposed_add.mlir"
    model = fusec.compile(path.read_text(), device="gpu", graphs=False)
    assert model.launches == 1
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8192, 8192), dtype=np.float32)
    y = rng.standard_normal((8192, 8192), dtype=np.float32)
    got = np.asarray(model(x, y))
    np.testing.assert_array_equal(got, np.maximum(x.T + y, np.float32(0)))


def test_static_tiles_ask_no_dynamic_shared_memory() -> None:
    """The tiles are static `cuda.shared.array`s: a launch that also asked for
    their size in dynamic shared memory held twice the memory per block."""
    program = check(transposed_add((33, 47), [1, 0]))
    (launch,) = program.functions["f"].launches
    assert "cuda.shared.array(" in program.kernels_source
    assert launch.shared_bytes == 0


@pytest.mark.parametrize(("shape", "perm", "tile"), [
    ((33, 47), [1, 0], 32),  # a staged tile
    ((3, 5, 7), [1, 0, 2], 0),  # the flat schedule, a strided read
])
def test_a_scalar_is_read_once_per_thread(shape: tuple[int, ...], perm: list[int],
                                          tile: int) -> None:
    """A one-element input scaling every element is loaded once, at the
    kernel's start (`hold_scalars`), and the numbers match the reference."""
    out = permuted(shape, perm)
    tx, to = t(shape), t(out)
    text = (f"func.func @f(%x: {tx}, %s: tensor<1xf32>) -> {to} {{\n"
            f"  %t = nn.transpose %x {{perm = {perm}}} : ({tx}) -> {to}\n"
            f"  %m = nn.mul %t, %s : ({to}, tensor<1xf32>) -> {to}\n"
            f"  %r = nn.tanh %m : {to}\n"
            f"  func.return %r : {to}\n}}\n")
    assert tile_of(text) == tile
    source = check(text).kernels_source
    assert source.count("held1 = in1[0]") == 1, source
    assert source.count("in1[") == 1, source


def test_a_plan_written_twice_holds_its_scalar_in_both_kernels() -> None:
    """The transposed plan is memoised with its body (`group_memo`): a second
    kernel written from it (a register probe's, then the program's) still
    reads the scalar it names."""
    from fusec.codegen import pointwise_transpose
    from fusec.scheduling.transposed_plan import planned_group

    text = ("func.func @f(%x: tensor<33x47xf32>, %s: tensor<1xf32>) -> tensor<47x33xf32> {\n"
            "  %t = nn.transpose %x {perm = [1, 0]} : (tensor<33x47xf32>) -> tensor<47x33xf32>\n"
            "  %m = nn.mul %t, %s : (tensor<47x33xf32>, tensor<1xf32>) -> tensor<47x33xf32>\n"
            "  func.return %m : tensor<47x33xf32>\n}\n")
    group = scheduled_group(text)
    schedule = group.attributes["schedule"]
    assert isinstance(schedule, PointwiseSchedule)
    for name in ("first", "second"):
        source = pointwise_transpose.emit(group, planned_group(group, schedule), name).text
        assert source.count("held1 = in1[0]") == 1, source
