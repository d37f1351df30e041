"""Reductions with several passes over non-trailing axes (issue 12 item 2):
softmax, log-softmax and normalisation along axis 0 or a middle axis, and
NCHW channel statistics, as ONE kernel in the column (or strided row)
layout; the softmax's max and sum of exps share one pass when the row is
re-read from memory (`online = 1`). Checked in the simulator against the
reference interpreter at tiny, odd shapes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fusec.analysis.program import Program
from fusec.compiler.compile import compile_model
from fusec.compiler.parsing import make_context, parse_module
from fusec.reference.interpreter import find_function, random_inputs, run_module
from fusec.runtime.executor import run_program
from fusec.scheduling import reduction_schedule as reduction
from fusec.scheduling.reduction_schedule import ReductionOptions
from tests.codegen_harness import tensor

# Few threads fill this "GPU": lanes stay few, so the simulator stays quick.
SMALL = ReductionOptions(fill_threads=64)
# And no row cache: later passes re-read memory, the softmax runs online.
NO_CACHE = ReductionOptions(fill_threads=64, shared_budget=0)


@pytest.fixture(params=[SMALL, NO_CACHE], ids=["cached", "memory"])
def options(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> ReductionOptions:
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS", request.param)
    return request.param


def _softmax(op: str, shape: tuple[int, ...], axis: int, element: str = "f32") -> str:
    t = tensor(shape, element)
    return (f"func.func @f(%x: {t}) -> {t} {{\n  %y = nn.{op} %x {{axis = {axis}}} : {t}\n"
            f"  func.return %y : {t}\n}}\n")


def check_program(text: str, launches: int, rtol: float = 1e-4,
                  atol: float = 1e-5) -> Program:
    """The default pipeline (fusion on): `launches` kernels, and the numbers
    of the reference interpreter on fresh random inputs."""
    program = compile_model(text).program
    assert len(program.functions["f"].launches) == launches, program.kernels_source
    reference = parse_module(make_context(), text, "t.mlir")
    inputs = random_inputs(find_function(reference, "f"), 11)
    expected = run_module(reference, inputs, "f")
    got = run_program(program, "f", inputs, device="sim")
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e.astype(g.dtype), rtol=rtol, atol=atol,
                                   err_msg=program.kernels_source)
    return program


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize(("shape", "axis"), [((13, 6), 0), ((3, 11, 5), 1), ((37, 2, 3), 0)])
def test_softmax_along_a_non_trailing_axis(op: str, shape: tuple[int, ...], axis: int,
                                           options: ReductionOptions) -> None:
    program = check_program(_softmax(op, shape, axis), launches=1)
    online = options is NO_CACHE
    assert ("chunk_base" in program.kernels_source) == online, program.kernels_source


def test_softmax_f16_along_axis_0(options: ReductionOptions) -> None:
    check_program(_softmax("softmax", (9, 5), 0, "f16"), launches=1, rtol=2e-3, atol=2e-3)


def column_layer_norm(rows: int, columns: int, gain: bool = False) -> str:
    """`(x - mean) * rsqrt(var + eps)` along axis 0 written out of
    primitives (two passes of statistics), times `%g` with `gain`."""
    t, k = tensor((rows, columns)), tensor((1, columns))
    args, scaled = (f", %g: {k}", f"\n  %y = nn.mul %n, %g : ({t}, {k}) -> {t}") if gain \
        else ("", "")
    last = "%n" if not gain else "%y"
    return f"""
func.func @f(%x: {t}{args}) -> {t} {{
  %m = nn.reduce_mean %x {{axes = [0], keepdims = true}} : ({t}) -> {k}
  %d = nn.sub %x, %m : ({t}, {k}) -> {t}
  %q = nn.mul %d, %d : ({t}, {t}) -> {t}
  %v = nn.reduce_mean %q {{axes = [0], keepdims = true}} : ({t}) -> {k}
  %eps = nn.constant dense<1.0e-05> : tensor<f32>
  %ve = nn.add %v, %eps : ({k}, tensor<f32>) -> {k}
  %r = nn.rsqrt %ve : {k}
  %n = nn.mul %d, %r : ({t}, {k}) -> {t}{scaled}
  func.return {last} : {t}
}}"""


def test_layer_norm_style_along_axis_0(options: ReductionOptions) -> None:
    check_program(column_layer_norm(11, 6, gain=True), launches=1)


def test_nchw_channel_stats(options: ReductionOptions) -> None:
    x, c = tensor((3, 4, 5, 3)), tensor((1, 4, 1, 1))
    text = f"""
func.func @f(%x: {x}) -> ({c}, {c}) {{
  %m = nn.reduce_mean %x {{axes = [0, 2, 3], keepdims = true}} : ({x}) -> {c}
  %d = nn.sub %x, %m : ({x}, {c}) -> {x}
  %sq = nn.mul %d, %d : ({x}, {x}) -> {x}
  %v = nn.reduce_mean %sq {{axes = [0, 2, 3], keepdims = true}} : ({x}) -> {c}
  func.return %m, %v : {c}, {c}
}}"""
    assert len(compile_model(text).program.functions["f"].launches) <= 2
    check_program(text, launches=1)


def test_default_schedule_widens_lanes_to_fill_the_gpu() -> None:
    # 6 columns are one block of 8 x 1 lanes without widening; the default
    # fill target widens the lanes along the 13 reduced elements to 16.
    program = check_program(_softmax("softmax", (13, 6), 0), launches=1)
    assert "block (8, 16, 1)" in program.kernels_source, program.kernels_source


def test_online_statistics_with_infinities(monkeypatch: pytest.MonkeyPatch) -> None:
    """-inf before the max (no `exp(-inf - -inf)` NaN), a column of -inf
    only and a NaN: as the reference computes them."""
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS", NO_CACHE)
    text = _softmax("softmax", (6, 4), 0)
    program = compile_model(text).program
    assert "chunk_base" in program.kernels_source
    x = np.random.default_rng(3).standard_normal((6, 4)).astype(np.float32)
    x[:3, 0] = -np.inf
    x[:, 1] = -np.inf
    x[4, 2] = np.nan
    x[2, 3] = np.inf
    reference = parse_module(make_context(), text, "t.mlir")
    assert find_function(reference, "f") is not None
    expected = run_module(reference, [x], "f")
    got = run_program(program, "f", [x], device="sim")
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("order", ["ascending", "descending", "random"])
def test_online_statistics_rescale_over_long_columns(order: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Each lane folds several elements: an ascending column raises the
    running max at every element (every step rescales the sum)."""
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS", NO_CACHE)
    text = _softmax("log_softmax", (261, 3), 0)
    program = compile_model(text).program
    assert "chunk_base" in program.kernels_source
    x = np.random.default_rng(5).standard_normal((261, 3)).astype(np.float32) * 4
    if order != "random":
        x = np.sort(x, axis=0)[:: 1 if order == "ascending" else -1].copy()
    expected = run_module(parse_module(make_context(), text, "t.mlir"), [x], "f")
    got = run_program(program, "f", [x], device="sim")
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("name", "launches"), [
    ("column_softmax", 2), ("softmax_mid_axis", 2), ("channel_stats", 2)])
def test_bench_programs_kernel_counts(name: str, launches: int) -> None:
    """At full size (compiled, not run): the softmaxes' columns are too few
    to fill the GPU, so each is split over blocks in two kernels (partial
    statistics, then the outputs: two reads of the input); channel
    statistics keep 128 channels, too few rows for one multi-pass kernel to
    fill the GPU, so the mean and the variance are two split kernels, each
    reading the input once."""
    text = (Path(__file__).parents[1] / "bench" / "programs" / f"{name}.mlir").read_text()
    program = compile_model(text).program
    assert len(program.functions[name].launches) == launches, program.kernels_source


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["column_softmax", "softmax_mid_axis", "channel_stats"])
def test_full_size_on_gpu(name: str) -> None:
    """The bench programs at full size on the GPU: at most 2 launches, the
    numbers of the reference interpreter."""
    text = (Path(__file__).parents[1] / "bench" / "programs" / f"{name}.mlir").read_text()
    program = compile_model(text).program
    fn = next(iter(program.functions))
    assert len(program.functions[fn].launches) <= 2, program.kernels_source
    reference = parse_module(make_context(), text, "t.mlir")
    inputs = random_inputs(find_function(reference, fn), 7)
    expected = run_module(reference, inputs, fn)
    got = run_program(program, fn, inputs, device="gpu")
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-6)
