"""Slices, reshapes, transposes and broadcasts read in place by reduction
groups (analysis/reduction_views.py): each program runs in numba's CUDA
simulator against the reference interpreter, with the kernel count asserted;
the views used to run as copy kernels of their own.
"""

from __future__ import annotations

import codegen_harness as harness
import pytest
from xdsl.dialects.builtin import ModuleOp

from fusec.analysis.program import Program
from fusec.analysis.remarks import collect_remarks
from fusec.compiler.driver import make_registry, module_to_text
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.scheduling import reduction_schedule as reduction
from fusec.scheduling.reduction_schedule import ReductionOptions

PIPELINE = "decompose,form-fusion-groups,group-each-op,tile-and-promote"
SMALL_GPU = ReductionOptions(fill_threads=4096, min_split_elems=4)
"""A GPU of 4096 threads: small rows already split over blocks."""
TOLERANCE = {"float32": 2e-5, "float16": 2e-3}


def t(shape: tuple[int, ...], dtype: str = "f32") -> str:
    """`tensor<...>` of `shape`."""
    return harness.tensor(shape, dtype)


def check(text: str, launches: int = 1, pipeline: str = PIPELINE) -> Program:
    """`launches` kernels, numbers as the reference's (fresh random inputs)."""
    return harness.check_program(text, launches, pipeline, seed=7, tolerance=TOLERANCE)


def fused(text: str, pipeline: str = PIPELINE) -> ModuleOp:
    """The module after `pipeline` (scheduled groups, remarks kept)."""
    ctx = make_context()
    module = parse_module(ctx, text, "test.mlir")
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), pipeline)).run(module)
    return module


def sum_exp_slice(rows: int, cols: int, start: int, width: int, dtype: str = "f32") -> str:
    """`reduce_sum(exp(x[:, start:start + width]))`."""
    tx, ts, tr = t((rows, cols), dtype), t((rows, width), dtype), t((rows, 1), dtype)
    return (f"func.func @f(%x: {tx}) -> {tr} {{\n"
            f"  %s = nn.slice %x {{starts = [0, {start}], limits = [{rows}, {start + width}]}} "
            f": ({tx}) -> {ts}\n"
            f"  %e = nn.exp %s : {ts}\n"
            f"  %r = nn.reduce_sum %e {{axes = [1], keepdims = true}} : ({ts}) -> {tr}\n"
            f"  func.return %r : {tr}\n}}\n")


def test_sum_of_exp_of_slice_is_one_kernel() -> None:
    program = check(sum_exp_slice(5, 40, 4, 32))
    assert "in0[uint32(4) + " in program.kernels_source  # the slice read at its offset


def test_sum_of_exp_of_slice_half() -> None:
    check(sum_exp_slice(3, 21, 3, 17, "f16"))


def test_slice_of_bias_add_read_by_reduction_and_tanh() -> None:
    """`reduce_sum(s)` and `tanh(s)` of `s = slice(x + b)`: one kernel; the
    add is evaluated at the element the slice reads (nothing writes `x + b`)."""
    tx, tb, ts, tr = t((6, 40)), t((40,)), t((6, 32)), t((6, 1))
    program = check(
        f"func.func @f(%x: {tx}, %b: {tb}) -> ({tr}, {ts}) {{\n"
        f"  %h = nn.add %x, %b : ({tx}, {tb}) -> {tx}\n"
        f"  %s = nn.slice %h {{starts = [0, 4], limits = [6, 36]}} : ({tx}) -> {ts}\n"
        f"  %r = nn.reduce_sum %s {{axes = [1], keepdims = true}} : ({ts}) -> {tr}\n"
        f"  %t = nn.tanh %s : {ts}\n"
        f"  func.return %r, %t : {tr}, {ts}\n}}\n")
    assert "in1[" in program.kernels_source  # b, read at the sliced column


def sum_exp_transpose(rows: int, cols: int) -> str:
    """`reduce_sum(exp(transpose(x)))` over the last axis of the transpose."""
    tx, tt, tr = t((cols, rows)), t((rows, cols)), t((rows, 1))
    return (f"func.func @f(%x: {tx}) -> {tr} {{\n"
            f"  %t = nn.transpose %x {{perm = [1, 0]}} : ({tx}) -> {tt}\n"
            f"  %e = nn.exp %t : {tt}\n"
            f"  %r = nn.reduce_sum %e {{axes = [1], keepdims = true}} : ({tt}) -> {tr}\n"
            f"  func.return %r : {tr}\n}}\n")


def test_transposed_operand_of_row_reduction_reads_as_a_column() -> None:
    """Rows of the transpose are columns of `x`: the column layout reads them
    coalesced (consecutive threads, consecutive rows), one kernel."""
    program = check(sum_exp_transpose(6, 9))
    assert 'layout = "column"' in module_to_text(fused(sum_exp_transpose(6, 9)))
    assert "in0[c0 + j * uint32(6)]" in program.kernels_source


def softmax_transpose(rows: int, cols: int) -> str:
    """`softmax(transpose(x))` along the last axis."""
    tx, tt = t((cols, rows)), t((rows, cols))
    return (f"func.func @f(%x: {tx}) -> {tt} {{\n"
            f"  %t = nn.transpose %x {{perm = [1, 0]}} : ({tx}) -> {tt}\n"
            f"  %y = nn.softmax %t {{axis = 1}} : {tt}\n"
            f"  func.return %y : {tt}\n}}\n")


def test_softmax_of_transpose_keeps_the_tiled_copy() -> None:
    """Refused: reading `x` coalesced (column layout) would write the
    softmax strided, and the other way round; the transpose stays a copy
    through a shared tile, the softmax a row kernel (two kernels)."""
    check(softmax_transpose(6, 9), launches=2)
    remarks = collect_remarks(fused(softmax_transpose(6, 9)))
    assert any("through nn.transpose (%t), but the view is contiguous along another axis"
               in r and "neither reduction layout coalesces both" in r for r in remarks)


def test_views_stay_copies_without_fold_views() -> None:
    check(sum_exp_slice(5, 40, 4, 32), launches=2,
          pipeline="decompose,form-fusion-groups{fold_views=false},group-each-op,tile-and-promote")


def test_column_reduction_of_a_slice() -> None:
    """A sum over axis 0 of rows 2..9 of `x`: the column layout, as without the slice."""
    tx, ts, tr = t((12, 7)), t((8, 7)), t((1, 7))
    check(f"func.func @f(%x: {tx}) -> {tr} {{\n"
          f"  %s = nn.slice %x {{starts = [2, 0], limits = [10, 7]}} : ({tx}) -> {ts}\n"
          f"  %r = nn.reduce_max %s {{axes = [0], keepdims = true}} : ({ts}) -> {tr}\n"
          f"  func.return %r : {tr}\n}}\n")


def test_layer_norm_of_reshaped_strided_slice() -> None:
    """A two-pass layer norm over a step-2 slice reshaped to 3-d, with a
    row-shaped output: every read goes through the composed view."""
    tx, ts, tv, tg = t((4, 24)), t((4, 12)), t((4, 3, 4)), t((4,))
    check(f"func.func @f(%x: {tx}, %g: {tg}, %b: {tg}) -> {tv} {{\n"
          f"  %s = nn.slice %x {{starts = [0, 1], limits = [4, 24], strides = [1, 2]}} "
          f": ({tx}) -> {ts}\n"
          f"  %v = nn.reshape %s : ({ts}) -> {tv}\n"
          f"  %y = nn.layer_norm %v, %g, %b {{axis = 2, epsilon = 1.0e-5}} "
          f": ({tv}, {tg}, {tg}) -> {tv}\n"
          f"  func.return %y : {tv}\n}}\n")


def test_row_split_over_blocks_reads_the_view(monkeypatch: pytest.MonkeyPatch) -> None:
    """One long row split over several blocks (the last one combines the
    partials): each block reads its chunk of the slice in place."""
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS", SMALL_GPU)
    tx, ts, tr = t((3010,)), t((3000,)), "tensor<f32>"
    program = check(f"func.func @f(%x: {tx}) -> {tr} {{\n"
                    f"  %s = nn.slice %x {{starts = [5], limits = [3005]}} : ({tx}) -> {ts}\n"
                    f"  %m = nn.reduce_max %s {{axes = [0]}} : ({ts}) -> {tr}\n"
                    f"  func.return %m : {tr}\n}}\n")
    assert program.functions["f"].launches[0].grid[1] > 1
    assert "in0[uint32(5) + " in program.kernels_source


COLUMN_SOFTMAX_OF_SLICE = """
func.func @f(%x: tensor<3202x4xf32>) -> tensor<3200x4xf32> {
  %y = fusion.group (%x) {name = "g0", kind = "reduction"}
      : (tensor<3202x4xf32>) -> tensor<3200x4xf32> {
  ^bb0(%a: tensor<3202x4xf32>):
    %s = nn.slice %a {starts = [1, 0], limits = [3201, 4]}
        : (tensor<3202x4xf32>) -> tensor<3200x4xf32>
    %m = nn.reduce_max %s {axes = [0], keepdims = true} : (tensor<3200x4xf32>) -> tensor<1x4xf32>
    %d = nn.sub %s, %m : (tensor<3200x4xf32>, tensor<1x4xf32>) -> tensor<3200x4xf32>
    %e = nn.exp %d : tensor<3200x4xf32>
    %z = nn.reduce_sum %e {axes = [0], keepdims = true} : (tensor<3200x4xf32>) -> tensor<1x4xf32>
    %q = nn.div %e, %z : (tensor<3200x4xf32>, tensor<1x4xf32>) -> tensor<3200x4xf32>
    fusion.yield %q : tensor<3200x4xf32>
  }
  func.return %y : tensor<3200x4xf32>
}
"""


@pytest.mark.slow  # 3200 rows, to be split over blocks
def test_column_softmax_of_a_slice_split_in_two_kernels(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The column schedule split over blocks in two kernels (partial
    statistics, then the outputs) reads the slice in place in both."""
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS", SMALL_GPU)
    program = harness.check_program(COLUMN_SOFTMAX_OF_SLICE, 2, None, seed=7,
                                    tolerance=TOLERANCE)
    assert all(launch.grid[1] > 1 for launch in program.functions["f"].launches)
    assert program.kernels_source.count("in0[uint32(4) + ") >= 2  # row 1 onwards, both kernels


def test_transposed_middle_axes_keep_the_row_layout() -> None:
    """A transpose that keeps the innermost axis is a row read, as before;
    the transposed value is also an output, written through its view."""
    tx, tt, tr = t((3, 5, 8)), t((5, 3, 8)), t((5, 3, 1))
    text = (f"func.func @f(%x: {tx}) -> ({tr}, {tt}) {{\n"
            f"  %t = nn.transpose %x {{perm = [1, 0, 2]}} : ({tx}) -> {tt}\n"
            f"  %m = nn.reduce_max %t {{axes = [2], keepdims = true}} : ({tt}) -> {tr}\n"
            f"  %d = nn.sub %t, %m : ({tt}, {tr}) -> {tt}\n"
            f"  func.return %m, %d : {tr}, {tt}\n}}\n")
    check(text)
    assert 'layout = "row"' in module_to_text(fused(text))
