"""The reference interpreter's API: choosing the function, inputs by position
or name and their errors, compute dtypes, random inputs, and running IR after
passes (`fusion.group`) or with calls."""

from __future__ import annotations

import numpy as np
import pytest
from reference_programs import parse

from fusec.compiler.parsing import make_context, parse_module
from fusec.reference.interpreter import (
    DEFAULT_INDEX_BOUND,
    find_function,
    random_inputs,
    run_function,
    run_module,
)

MIXED = parse("""
func.func private @helper(%x: tensor<2xf32>) -> tensor<2xf32> {
  func.return %x : tensor<2xf32>
}
func.func @main(%x: tensor<2x3xf32>, %ids: tensor<4xi64>, %bias: tensor<3xf32>)
    -> (tensor<2x3xf32>, tensor<4x3xf32>, tensor<2x3xi1>, tensor<4xi64>) {
  %y = nn.add %x, %bias : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %g = nn.gather %y, %ids {axis = 0} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>
  %m = nn.cmp %x, %bias {predicate = "gt"} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  func.return %y, %g, %m, %ids : tensor<2x3xf32>, tensor<4x3xf32>, tensor<2x3xi1>, tensor<4xi64>
}
func.func @second(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = nn.neg %x : tensor<2xf32>
  func.return %y : tensor<2xf32>
}
""")

X = np.arange(6.0).reshape(2, 3)
IDS = np.array([1, 0, 1, 1])
BIAS = np.array([10.0, 20.0, 30.0])


def test_first_public_function_is_the_default() -> None:
    assert find_function(MIXED).sym_name.data == "main"
    y, g, m, ids = run_module(MIXED, [X, IDS, BIAS])
    np.testing.assert_array_equal(y, X + BIAS)
    np.testing.assert_array_equal(g, (X + BIAS)[[1, 0, 1, 1]])
    assert m.dtype == np.bool_ and not m.any()
    assert ids.dtype == np.int64


def test_function_by_name() -> None:
    (y,) = run_module(MIXED, [np.array([1.0, -2.0])], function="second")
    np.testing.assert_array_equal(y, [-1.0, 2.0])
    with pytest.raises(ValueError, match=r"no function @nope \(functions: @helper, @main"):
        run_module(MIXED, [], function="nope")


def test_inputs_by_argument_name_in_any_order() -> None:
    by_name = run_module(MIXED, {"bias": BIAS, "ids": IDS, "x": X})
    for a, b in zip(by_name, run_module(MIXED, [X, IDS, BIAS]), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ([X, IDS], r"@main takes 3 input\(s\) \(%x, %ids, %bias\), got 2"),
        ({"x": X, "ids": IDS}, r"missing input\(s\) %bias; @main takes x, ids, bias"),
        ({"x": X, "ids": IDS, "bias": BIAS, "b": BIAS}, r"unknown input name\(s\) 'b'"),
        ([X.T, IDS, BIAS], r"input %x of @main has shape 3x2, expected 2x3 \(tensor<2x3xf32>\)"),
        ([X, IDS + 0.5, BIAS], r"input %ids of @main has float64 elements, expected i64"),
    ],
    ids=["count", "missing", "unknown", "shape", "element-kind"],
)
def test_input_errors_name_the_argument(inputs: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        run_module(MIXED, inputs)  # type: ignore[arg-type]


def test_float32_mode_computes_and_returns_float32() -> None:
    module = parse("""
func.func @f(%x: tensor<2xf32>, %e: tensor<f32>) -> (tensor<2xf32>, tensor<2xi1>) {
  %a = nn.add %x, %e : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %b = nn.sub %a, %x : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %m = nn.cmp %b, %e {predicate = "eq"} : (tensor<2xf32>, tensor<f32>) -> tensor<2xi1>
  func.return %b, %m : tensor<2xf32>, tensor<2xi1>
}""")
    inputs = [np.ones(2), np.array(1e-8)]
    # (1 + 1e-8) - 1 is 0 in float32 but about 1e-8 in float64.
    b32, m32 = run_module(module, inputs, dtype=np.float32)
    assert b32.dtype == np.float32 and m32.dtype == np.bool_
    np.testing.assert_array_equal(b32, [0.0, 0.0])
    b64, _ = run_module(module, inputs)
    assert b64.dtype == np.float64
    np.testing.assert_allclose(b64, 1e-8, rtol=1e-7)


def test_dtype_must_be_floating_point() -> None:
    with pytest.raises(ValueError, match="dtype must be a floating-point type"):
        run_module(MIXED, [X, IDS, BIAS], dtype=np.int32)


def test_outputs_never_alias_inputs() -> None:
    x = np.array([1.0, 2.0])
    (y,) = run_module(MIXED, [x], function="helper")
    y[0] = 99.0
    assert x[0] == 1.0


def test_overflow_gives_inf_without_warnings() -> None:
    module = parse("""
func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = nn.exp %x : tensor<2xf32>
  func.return %y : tensor<2xf32>
}""")
    (y,) = run_module(module, [np.array([1000.0, 0.0])])
    np.testing.assert_array_equal(y, [np.inf, 1.0])


def test_unknown_op_is_reported_by_name() -> None:
    module = parse_module(make_context(), """
func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = builtin.unrealized_conversion_cast %x : tensor<2xf32> to tensor<2xf32>
  func.return %y : tensor<2xf32>
}""", "t.mlir")
    with pytest.raises(NotImplementedError, match=r"builtin\.unrealized_conversion_cast"):
        run_module(module, [np.zeros(2)])


# --- random inputs ---------------------------------------------------------------------------


def test_random_inputs_have_the_argument_types() -> None:
    x, ids, bias = random_inputs(find_function(MIXED))
    assert (x.shape, x.dtype) == ((2, 3), np.float32)
    assert (ids.shape, ids.dtype) == ((4,), np.int64)
    assert bias.shape == (3,) and np.all(x != 0)
    # %ids indexes a table of 2 rows.
    assert ids.min() >= 0 and ids.max() < 2


def test_random_inputs_are_reproducible_per_seed() -> None:
    func = find_function(MIXED)
    a, b, c = random_inputs(func, 1), random_inputs(func, 1), random_inputs(func, 2)
    np.testing.assert_array_equal(a[0], b[0])
    assert not np.array_equal(a[0], c[0])


def test_random_inputs_respect_domains_and_look_through_groups() -> None:
    module = parse("""
func.func @f(%x: tensor<64xf32>, %m: tensor<64xi1>, %i: tensor<64xi32>, %t: tensor<3x2xf16>)
    -> (tensor<64xf32>, tensor<64x2xf16>) {
  %y = fusion.group (%x) : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%xa: tensor<64xf32>):
    %l = nn.log %xa : tensor<64xf32>
    fusion.yield %l : tensor<64xf32>
  }
  %g = nn.gather %t, %i {axis = 0} : (tensor<3x2xf16>, tensor<64xi32>) -> tensor<64x2xf16>
  func.return %y, %g : tensor<64xf32>, tensor<64x2xf16>
}""")
    x, m, i, t = random_inputs(find_function(module), seed=3)
    assert x.min() >= 0.5  # feeds nn.log inside the group
    assert m.dtype == np.bool_ and m.any() and not m.all()
    assert i.dtype == np.int32 and set(np.unique(i)) == {0, 1, 2}
    assert t.dtype == np.float16
    y, _ = run_module(module, [x, m, i, t])
    assert np.all(np.isfinite(y))


def test_integers_feeding_no_gather_use_the_default_bound() -> None:
    module = parse("""
func.func @f(%i: tensor<256xi64>) -> tensor<256xi64> {
  %y = nn.abs %i : tensor<256xi64>
  func.return %y : tensor<256xi64>
}""")
    (i,) = random_inputs(find_function(module))
    assert set(np.unique(i)) == set(range(DEFAULT_INDEX_BOUND))


# --- IR after passes -------------------------------------------------------------------------

UNGROUPED = """
func.func @f(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>) {
  %s = nn.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r = nn.relu %s : tensor<4x8xf32>
  %m = nn.reduce_max %s {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %e = nn.sub %r, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  func.return %e, %m : tensor<4x8xf32>, tensor<4x1xf32>
}"""

GROUPED = """
func.func @f(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>) {
  %r, %m = fusion.group (%b, %x) {kind = "row_reduction"}
      : (tensor<8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>) {
  ^bb0(%ba: tensor<8xf32>, %xa: tensor<4x8xf32>):
    %s = nn.add %xa, %ba : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %r0 = nn.relu %s : tensor<4x8xf32>
    %m0 = nn.reduce_max %s {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
    fusion.yield %r0, %m0 : tensor<4x8xf32>, tensor<4x1xf32>
  }
  %e = fusion.group (%r, %m) : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32> {
  ^bb0(%ra: tensor<4x8xf32>, %ma: tensor<4x1xf32>):
    %e0 = nn.sub %ra, %ma : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    fusion.yield %e0 : tensor<4x8xf32>
  }
  func.return %e, %m : tensor<4x8xf32>, tensor<4x1xf32>
}"""


def test_fusion_groups_compute_what_the_ungrouped_program_does() -> None:
    rng = np.random.default_rng(0)
    x, b = rng.standard_normal((4, 8)), rng.standard_normal(8)
    e, m = run_module(parse(GROUPED), {"x": x, "b": b})
    e0, m0 = run_module(parse(UNGROUPED), {"x": x, "b": b})
    np.testing.assert_array_equal(e, e0)
    np.testing.assert_array_equal(m, m0)
    # And both are what the program means.
    np.testing.assert_array_equal(m[:, 0], (x + b).max(axis=1))
    np.testing.assert_array_equal(e, np.maximum(x + b, 0) - m)


def test_func_call_runs_the_callee() -> None:
    module = parse("""
func.func private @twice(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = nn.add %x, %x : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  func.return %y : tensor<2xf32>
}
func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = func.call @twice(%x) : (tensor<2xf32>) -> tensor<2xf32>
  %z = func.call @twice(%y) : (tensor<2xf32>) -> tensor<2xf32>
  func.return %z : tensor<2xf32>
}""")
    (z,) = run_function(find_function(module), [np.array([1.0, -0.5])])
    np.testing.assert_array_equal(z, [4.0, -2.0])
