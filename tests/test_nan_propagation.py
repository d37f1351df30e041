"""NaN propagates through max and min everywhere, as in np.maximum and
torch.maximum (issue 10 item 2): elementwise nn.max / nn.min (either operand
NaN), relu, clamp, reduce_max / reduce_min, max pooling and softmax, in the
kernels (simulator), the reference and constant folding alike."""

from __future__ import annotations

import numpy as np
import pytest

from fusec.compiler.compile import compile_model
from fusec.compiler.parsing import make_context, parse_module
from fusec.reference.interpreter import find_function, random_inputs, run_module
from fusec.runtime.executor import run_program
from fusec.scheduling import reduction_schedule as reduction
from fusec.scheduling.reduction_schedule import ReductionOptions
from tests.codegen_harness import tensor

NAN = np.float32(np.nan)


def _run(text: str, inputs: list[np.ndarray], fusion: bool,
         device: str = "sim") -> tuple[list[np.ndarray], ...]:
    """(kernels on `device`, reference) outputs of @f; the reference agrees
    with the kernels NaN for NaN and within float32 rounding."""
    program = compile_model(text, fusion=fusion).program
    got = run_program(program, "f", inputs, device=device)
    expected = run_module(parse_module(make_context(), text, "t.mlir"), inputs, "f")
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6, err_msg=program.kernels_source)
    return got, expected


def _with_nans(text: str, where: dict[int, list[tuple[int, ...]]],
               seed: int = 0) -> list[np.ndarray]:
    """Random inputs of @f with NaN at the given positions of argument k."""
    inputs = random_inputs(find_function(parse_module(make_context(), text, "t.mlir"), "f"), seed)
    for k, positions in where.items():
        for p in positions:
            inputs[k][p] = NAN
    return inputs


BINARY = """
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %y = nn.max %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %z = nn.min %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %y, %z : tensor<4xf32>, tensor<4xf32>
}"""


@pytest.mark.parametrize("fusion", [True, False])
def test_max_min_propagate_nan_from_either_operand(fusion: bool) -> None:
    a = np.array([1, np.nan, 2, 3], np.float32)
    b = np.array([np.nan, 1, 0, 5], np.float32)
    (mx, mn), _ = _run(BINARY, [a, b], fusion)
    np.testing.assert_array_equal(mx, [np.nan, np.nan, 2, 5])
    np.testing.assert_array_equal(mn, [np.nan, np.nan, 0, 3])


def test_folded_max_min_propagate_nan() -> None:
    a = np.array([1, np.nan, 2, 3], np.float32).tobytes().hex().upper()
    b = np.array([np.nan, 1, 0, 5], np.float32).tobytes().hex().upper()
    text = f"""
func.func @f() -> (tensor<4xf32>, tensor<4xf32>) {{
  %a = nn.constant dense<"0x{a}"> : tensor<4xf32>
  %b = nn.constant dense<"0x{b}"> : tensor<4xf32>
  %y = nn.max %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %z = nn.min %b, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %y, %z : tensor<4xf32>, tensor<4xf32>
}}"""
    program = compile_model(text).program
    assert program.functions["f"].launches == []  # both folded
    (mx, mn), _ = _run(text, [], True)
    np.testing.assert_array_equal(mx, [np.nan, np.nan, 2, 5])
    np.testing.assert_array_equal(mn, [np.nan, np.nan, 0, 3])


@pytest.mark.parametrize("fusion", [True, False])
def test_relu_clamp_and_a_fused_chain_keep_nan(fusion: bool) -> None:
    t = tensor((4, 8))
    text = f"""
func.func @f(%x: {t}, %y: {t}) -> ({t}, {t}, {t}) {{
  %r = nn.relu %x : {t}
  %c = nn.clamp %x {{min = 0.0, max = 6.0}} : {t}
  %m = nn.max %y, %r : ({t}, {t}) -> {t}
  %e = nn.exp %m : {t}
  func.return %r, %c, %e : {t}, {t}, {t}
}}"""
    inputs = _with_nans(text, {0: [(0, 0), (2, 5)], 1: [(1, 1), (3, 7)]})
    (r, c, e), _ = _run(text, inputs, fusion)
    assert np.isnan(r[0, 0]) and np.isnan(c[2, 5])
    assert np.isnan(e[[0, 1, 2, 3], [0, 1, 5, 7]]).all()


@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
@pytest.mark.parametrize(
    ("shape", "axes", "nans"),
    [
        ((4, 8), [1], [(0, 0), (1, 7), (2, 3)]),  # first, last, middle of a row
        ((8, 4), [0], [(0, 1), (7, 2)]),  # down columns
        ((3, 300), [1], [(0, 0), (1, 299), (2, 150)]),  # longer rows than one pass
    ],
)
def test_reductions_propagate_nan(op: str, shape: tuple[int, int], axes: list[int],
                                  nans: list[tuple[int, int]]) -> None:
    out = (shape[0],) if axes == [1] else (shape[1],)
    text = f"""
func.func @f(%x: {tensor(shape)}) -> {tensor(out)} {{
  %r = nn.{op} %x {{axes = {axes}}} : ({tensor(shape)}) -> {tensor(out)}
  func.return %r : {tensor(out)}
}}"""
    (r,), _ = _run(text, _with_nans(text, {0: nans}), True)
    hit = {p[1 - axes[0]] for p in nans}
    assert [bool(np.isnan(v)) for v in r] == [i in hit for i in range(len(r))]


def test_softmax_row_with_nan_is_nan() -> None:
    t = tensor((3, 8))
    text = f"""
func.func @f(%x: {t}) -> {t} {{
  %s = nn.softmax %x {{axis = -1}} : {t}
  func.return %s : {t}
}}"""
    (s,), _ = _run(text, _with_nans(text, {0: [(1, 6)]}), True)
    assert np.isnan(s[1]).all() and not np.isnan(s[[0, 2]]).any()


@pytest.mark.parametrize("fusion", [True, False])
def test_max_pool_propagates_nan(fusion: bool) -> None:
    # Fused, conv + pool is one kernel (conv_pool); unfused, the conv and a
    # lone pool (a window kernel) run apart; %p pools the input directly.
    text = """
func.func @f(%x: tensor<1x2x6x6xf32>, %w: tensor<2x2x3x3xf32>)
    -> (tensor<1x2x2x2xf32>, tensor<1x2x3x3xf32>) {
  %y = nn.conv2d %x, %w {pads = [1, 1, 1, 1]}
      : (tensor<1x2x6x6xf32>, tensor<2x2x3x3xf32>) -> tensor<1x2x6x6xf32>
  %q = nn.max_pool2d %y {kernel = [3, 3], strides = [3, 3]}
      : (tensor<1x2x6x6xf32>) -> tensor<1x2x2x2xf32>
  %p = nn.max_pool2d %x {kernel = [2, 2], strides = [2, 2]}
      : (tensor<1x2x6x6xf32>) -> tensor<1x2x3x3xf32>
  func.return %q, %p : tensor<1x2x2x2xf32>, tensor<1x2x3x3xf32>
}"""
    (q, p), _ = _run(text, _with_nans(text, {0: [(0, 0, 5, 5), (0, 1, 2, 1)]}), fusion)
    assert np.isnan(p[0, 0, 2, 2]) and np.isnan(p[0, 1, 1, 0])
    assert np.isnan(p).sum() == 2
    assert np.isnan(q).any()


@pytest.mark.parametrize(
    "options",
    [
        ReductionOptions(registers=False),  # rows streamed, lanes combined in shared memory
        ReductionOptions(fill_threads=4096, min_split_elems=4),  # rows split over blocks
    ],
)
@pytest.mark.parametrize("op", ["reduce_max", "reduce_min"])
def test_reduction_schedules_propagate_nan(op: str, options: ReductionOptions,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reduction, "DEFAULT_OPTIONS", options)
    text = f"""
func.func @f(%x: tensor<2x600xf32>, %y: tensor<600x3xf32>) -> (tensor<2xf32>, tensor<3xf32>) {{
  %r = nn.{op} %x {{axes = [1]}} : (tensor<2x600xf32>) -> tensor<2xf32>
  %c = nn.{op} %y {{axes = [0]}} : (tensor<600x3xf32>) -> tensor<3xf32>
  func.return %r, %c : tensor<2xf32>, tensor<3xf32>
}}"""
    inputs = _with_nans(text, {0: [(1, 599)], 1: [(0, 0), (450, 2)]})
    (r, c), _ = _run(text, inputs, False)
    assert [bool(np.isnan(v)) for v in r] == [False, True]
    assert [bool(np.isnan(v)) for v in c] == [True, False, True]


@pytest.mark.gpu
@pytest.mark.parametrize("fusion", [True, False])
def test_nan_propagates_on_the_gpu(fusion: bool) -> None:
    # On a GPU the builtin max is fmaxf, which drops NaN from either side.
    a = np.array([1, np.nan, 2, 3], np.float32)
    b = np.array([np.nan, 1, 0, 5], np.float32)
    (mx, mn), _ = _run(BINARY, [a, b], fusion, device="gpu")
    np.testing.assert_array_equal(mx, [np.nan, np.nan, 2, 5])
    np.testing.assert_array_equal(mn, [np.nan, np.nan, 0, 3])
    text = f"""
func.func @f(%x: {tensor((4, 300))}) -> ({tensor((4,))}, {tensor((4, 300))}) {{
  %r = nn.reduce_max %x {{axes = [1]}} : ({tensor((4, 300))}) -> {tensor((4,))}
  %s = nn.relu %x : {tensor((4, 300))}
  func.return %r, %s : {tensor((4,))}, {tensor((4, 300))}
}}"""
    (r, s), _ = _run(text, _with_nans(text, {0: [(1, 0), (3, 299)]}), fusion, device="gpu")
    assert [bool(np.isnan(v)) for v in r] == [False, True, False, True]
    assert np.isnan(s).sum() == 2
