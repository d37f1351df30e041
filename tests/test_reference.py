"""The NumPy reference interpreter, op by op, against hand-computed values and
identities; also its API (inputs by name, errors, dtypes, random inputs) and
the interpretation of `fusion.group`.

Windows, contractions and layout ops are in `test_reference_windows.py`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from reference_programs import parse, run_op, ttype, type_of

from fusec.reference.interpreter import run_module


def unary(op: str, x: Sequence[float], attrs: str = "") -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    return run_op(op, arr, result=type_of(arr), attrs=attrs)


# --- elementwise, one operand -----------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "x", "expected"),
    [
        ("nn.neg", [1.5, -2.0], [-1.5, 2.0]),
        ("nn.abs", [-3.0, 2.0], [3.0, 2.0]),
        ("nn.exp", [0.0, 1.0], [1.0, math.e]),
        ("nn.log", [1.0, math.e], [0.0, 1.0]),
        ("nn.sqrt", [4.0, 2.25], [2.0, 1.5]),
        ("nn.rsqrt", [4.0, 0.25], [0.5, 2.0]),
        ("nn.reciprocal", [4.0, -0.5], [0.25, -2.0]),
        ("nn.tanh", [0.0, 100.0], [0.0, 1.0]),
        ("nn.erf", [0.0, 0.5, 1.0, -1.0], [0.0, 0.5204998778130465, 0.8427007929497149,
                                            -0.8427007929497149]),
        ("nn.sigmoid", [0.0, 800.0, -800.0], [0.5, 1.0, 0.0]),
        ("nn.relu", [-1.0, 0.0, 2.0], [0.0, 0.0, 2.0]),
        ("nn.silu", [0.0, 1.0], [0.0, 0.7310585786300049]),
    ],
)
def test_unary_known_values(op: str, x: list[float], expected: list[float]) -> None:
    np.testing.assert_allclose(unary(op, x), expected, rtol=1e-14, atol=1e-15)


def test_sigmoid_keeps_relative_accuracy_far_left() -> None:
    # 1 / (1 + exp(40)) is about exp(-40); a naive form would round it badly.
    (y,) = unary("nn.sigmoid", [-40.0])
    assert y == pytest.approx(math.exp(-40) / (1 + math.exp(-40)), rel=1e-14)


def test_gelu_exact_is_x_times_normal_cdf() -> None:
    # Phi(1) = 0.8413447460685429, Phi(-1) = 1 - Phi(1).
    y = unary("nn.gelu", [0.0, 1.0, -1.0, 3.0], attrs='approximate = "none"')
    np.testing.assert_allclose(
        y, [0.0, 0.8413447460685429, -0.15865525393145707, 3 * 0.9986501019683699], rtol=1e-14
    )


def test_gelu_default_is_exact_form() -> None:
    np.testing.assert_allclose(unary("nn.gelu", [1.0]), [0.8413447460685429], rtol=1e-14)


def test_gelu_tanh_form() -> None:
    y = unary("nn.gelu", [0.0, 1.0, -2.0], attrs='approximate = "tanh"')
    # Published values of the tanh approximation: 0.841192 at 1, -0.045402 at -2.
    np.testing.assert_allclose(y, [0.0, 0.8411919906082768, -0.04540230591222], rtol=1e-9)
    assert abs(y[1] - 0.8413447460685429) > 1e-4  # really the other formula


@pytest.mark.parametrize(
    ("attrs", "expected"),
    [
        ("min = 0.0, max = 6.0", [0.0, 0.5, 6.0]),
        ("min = 0.0", [0.0, 0.5, 7.0]),
        ("max = 1.0", [-3.0, 0.5, 1.0]),
        ("", [-3.0, 0.5, 7.0]),
    ],
)
def test_clamp_bounds_are_optional(attrs: str, expected: list[float]) -> None:
    np.testing.assert_array_equal(unary("nn.clamp", [-3.0, 0.5, 7.0], attrs), expected)


def test_clamp_of_integers_stays_integer() -> None:
    x = np.array([-5, 3, 9], dtype=np.int32)
    y = run_op("nn.clamp", x, result=ttype([3], "i32"), attrs="min = 0, max = 6")
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, [0, 3, 6])


# --- elementwise, broadcasting ----------------------------------------------------------


def test_add_broadcasts_like_numpy() -> None:
    a = np.arange(6.0).reshape(2, 1, 3)
    b = np.array([[10.0], [20.0], [30.0], [40.0]])
    y = run_op("nn.add", a, b, result=ttype([2, 4, 3]))
    for i in range(2):
        for j in range(4):
            for k in range(3):
                assert y[i, j, k] == a[i, 0, k] + b[j, 0]


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        ("nn.sub", [-1.0, 0.0, 1.0]),
        ("nn.mul", [2.0, 4.0, 6.0]),
        ("nn.div", [0.5, 1.0, 1.5]),
        ("nn.max", [2.0, 2.0, 3.0]),
        ("nn.min", [1.0, 2.0, 2.0]),
        ("nn.pow", [1.0, 4.0, 9.0]),
    ],
)
def test_binary_with_a_scalar_tensor(op: str, expected: list[float]) -> None:
    y = run_op(op, np.array([1.0, 2.0, 3.0]), np.array(2.0), result=ttype([3]))
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize(
    ("predicate", "expected"),
    [
        ("lt", [True, False, False]),
        ("le", [True, True, False]),
        ("gt", [False, False, True]),
        ("ge", [False, True, True]),
        ("eq", [False, True, False]),
        ("ne", [True, False, True]),
    ],
)
def test_cmp_predicates(predicate: str, expected: list[bool]) -> None:
    y = run_op(
        "nn.cmp", np.array([1.0, 2.0, 3.0]), np.array(2.0),
        result=ttype([3], "i1"), attrs=f'predicate = "{predicate}"',
    )
    assert y.dtype == np.bool_
    np.testing.assert_array_equal(y, expected)


def test_select_broadcasts_all_three() -> None:
    cond = np.array([[True], [False]])
    y = run_op(
        "nn.select", cond, np.array([1.0, 2.0, 3.0]), np.array(-1.0), result=ttype([2, 3])
    )
    np.testing.assert_array_equal(y, [[1.0, 2.0, 3.0], [-1.0, -1.0, -1.0]])


# --- cast and constant ------------------------------------------------------------------


def test_cast_to_f16_rounds_to_half_precision() -> None:
    x = np.array([1 + 2.0**-12, 1 + 2.0**-9], dtype=np.float32)
    y = run_op("nn.cast", x, result=ttype([2], "f16"))
    # f16 keeps 10 mantissa bits: 2^-12 is lost, 2^-9 kept. Held in float64.
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, [1.0, 1 + 2.0**-9])


def test_cast_to_bf16_rounds_to_nearest_even() -> None:
    x = np.array([1 + 2.0**-9, 1 + 3 * 2.0**-9, 1 + 2.0**-8, -2.5])
    y = run_op("nn.cast", x, result=ttype([4], "bf16"))
    # bf16 keeps 7 mantissa bits (ulp 2^-7 at 1): a quarter ulp rounds down,
    # three quarters up, exactly half an ulp to the even neighbour (1.0).
    np.testing.assert_array_equal(y, [1.0, 1 + 2.0**-7, 1.0, -2.5])


def test_cast_float_to_int_truncates_toward_zero() -> None:
    y = run_op("nn.cast", np.array([-1.7, 1.7, 2.0]), result=ttype([3], "i32"))
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, [-1, 1, 2])


def test_cast_to_and_from_i1() -> None:
    mask = run_op("nn.cast", np.array([0.0, 2.5]), result=ttype([2], "i1"))
    np.testing.assert_array_equal(mask, [False, True])
    back = run_op("nn.cast", mask, result=ttype([2], "f32"))
    np.testing.assert_array_equal(back, [0.0, 1.0])


def test_constants_splat_dense_and_integer() -> None:
    module = parse(
        "func.func @f() -> (tensor<2x2xf32>, tensor<3xi32>) {\n"
        "  %a = nn.constant dense<0.5> : tensor<2x2xf32>\n"
        "  %b = nn.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>\n"
        "  %c = nn.add %a, %b : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>\n"
        "  %i = nn.constant dense<[7, -1, 3]> : tensor<3xi32>\n"
        "  func.return %c, %i : tensor<2x2xf32>, tensor<3xi32>\n}\n"
    )
    c, i = run_module(module, [])
    np.testing.assert_array_equal(c, [[1.5, 2.5], [3.5, 4.5]])
    assert i.dtype == np.int32
    np.testing.assert_array_equal(i, [7, -1, 3])


# --- reductions -------------------------------------------------------------------------


def reduce(op: str, x: np.ndarray, axes: str, keepdims: bool, result: Sequence[int]) -> np.ndarray:
    attrs = f"axes = {axes}, keepdims = {'true' if keepdims else 'false'}"
    return run_op(op, x, result=ttype(result), attrs=attrs)


def test_reduce_sum_one_axis() -> None:
    x = np.arange(24.0).reshape(2, 3, 4)
    y = reduce("nn.reduce_sum", x, "[1]", False, [2, 4])
    for i in range(2):
        for k in range(4):
            assert y[i, k] == x[i, 0, k] + x[i, 1, k] + x[i, 2, k]


def test_reduce_negative_axis_keepdims() -> None:
    x = np.arange(24.0).reshape(2, 3, 4)
    y = reduce("nn.reduce_max", x, "[-1]", True, [2, 3, 1])
    # Rows of arange end in their largest element, 4*row + 3.
    np.testing.assert_array_equal(y[:, :, 0], np.arange(6).reshape(2, 3) * 4 + 3)


def test_reduce_several_axes() -> None:
    x = np.arange(24.0).reshape(2, 3, 4)
    y = reduce("nn.reduce_mean", x, "[0, -1]", True, [1, 3, 1])
    # Middle index j: elements 12*i + 4*j + k, mean over i in {0,1}, k in 0..3 is 4j + 7.5.
    np.testing.assert_array_equal(y.reshape(3), [7.5, 11.5, 15.5])
    lo = reduce("nn.reduce_min", x, "[2, 0]", False, [3])
    np.testing.assert_array_equal(lo, [0.0, 4.0, 8.0])


def test_reduce_sum_of_int32_stays_int32() -> None:
    x = np.array([[1, 2], [3, 4]], dtype=np.int32)
    y = run_op("nn.reduce_sum", x, result=ttype([2], "i32"), attrs="axes = [0]")
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, [4, 6])


# --- composites -------------------------------------------------------------------------


def test_softmax_rows_sum_to_one_without_overflow() -> None:
    x = np.array([[1000.0, 1001.0], [-5.0, -5.0]])
    y = run_op("nn.softmax", x, result=ttype([2, 2]))
    np.testing.assert_allclose(y.sum(axis=-1), 1.0, rtol=1e-15)
    np.testing.assert_allclose(y[0], [1 / (1 + math.e), math.e / (1 + math.e)], rtol=1e-14)
    np.testing.assert_array_equal(y[1], [0.5, 0.5])


def test_softmax_along_axis_zero() -> None:
    x = np.random.default_rng(1).standard_normal((3, 5))
    y = run_op("nn.softmax", x, result=ttype([3, 5]), attrs="axis = 0")
    np.testing.assert_allclose(y.sum(axis=0), 1.0, rtol=1e-14)


def test_log_softmax_is_log_of_softmax() -> None:
    x = np.random.default_rng(2).standard_normal((4, 6)) * 10
    logs = run_op("nn.log_softmax", x, result=ttype([4, 6]))
    probs = run_op("nn.softmax", x, result=ttype([4, 6]))
    np.testing.assert_allclose(np.exp(logs), probs, rtol=1e-12)
    flat = run_op("nn.log_softmax", np.zeros((1, 2)) + 3.0, result=ttype([1, 2]))
    np.testing.assert_allclose(flat, -math.log(2.0), rtol=1e-15)


def test_layer_norm_over_trailing_axes_standardizes() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4)) * 5 + 7
    ones, zeros = np.ones((3, 4)), np.zeros((3, 4))
    attrs = "axis = -2, epsilon = 1.0e-12"
    z = run_op("nn.layer_norm", x, ones, zeros, result=ttype([2, 3, 4]), attrs=attrs)
    # Over the normalized axes (1, 2): mean 0, variance 1.
    np.testing.assert_allclose(z.mean(axis=(1, 2)), 0.0, atol=1e-14)
    np.testing.assert_allclose(z.var(axis=(1, 2)), 1.0, rtol=1e-10)
    scale, bias = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    y = run_op("nn.layer_norm", x, scale, bias, result=ttype([2, 3, 4]), attrs=attrs)
    np.testing.assert_allclose(y, z * scale + bias, rtol=1e-12, atol=1e-12)


def test_layer_norm_epsilon_enters_under_the_root() -> None:
    # Row [1, 3]: mean 2, variance 1, so y = +-1 / sqrt(1 + eps).
    x = np.array([[1.0, 3.0]])
    y = run_op(
        "nn.layer_norm", x, np.ones(2), np.zeros(2), result=ttype([1, 2]), attrs="epsilon = 0.5"
    )
    np.testing.assert_allclose(y, [[-1 / math.sqrt(1.5), 1 / math.sqrt(1.5)]], rtol=1e-15)


def test_rms_norm_hand_computed() -> None:
    # mean([3^2, 4^2]) = 12.5
    x = np.array([[3.0, 4.0]])
    y = run_op(
        "nn.rms_norm", x, np.array([1.0, 2.0]), result=ttype([1, 2]), attrs="epsilon = 1.5"
    )
    np.testing.assert_allclose(y, [[3 / math.sqrt(14.0), 8 / math.sqrt(14.0)]], rtol=1e-15)


def test_batch_norm_per_channel() -> None:
    x = np.array([[[[1.0, 2.0]], [[10.0, 20.0]]]])  # N1 C2 H1 W2
    scale, bias = np.array([2.0, 1.0]), np.array([0.5, -1.0])
    mean, var = np.array([1.0, 10.0]), np.array([3.0, 99.0])
    y = run_op(
        "nn.batch_norm", x, scale, bias, mean, var, result=ttype([1, 2, 1, 2]),
        attrs="epsilon = 1.0",
    )
    # channel 0: (x - 1) / 2 * 2 + 0.5; channel 1: (x - 10) / 10 - 1.
    np.testing.assert_allclose(y.reshape(2, 2), [[0.5, 1.5], [-1.0, 0.0]], rtol=1e-15)


def test_bf16_input_given_as_uint16_bits_is_read_as_bits() -> None:
    # The runtime takes a uint16 array for a bf16 parameter as bit patterns;
    # the reference read the same array as integers (0x3F80 as 16256.0).
    from fusec.dialects.element_types import bf16_bits

    text = """
func.func @f(%x: tensor<3xbf16>) -> tensor<3xbf16> {
  %y = nn.add %x, %x : (tensor<3xbf16>, tensor<3xbf16>) -> tensor<3xbf16>
  func.return %y : tensor<3xbf16>
}
"""
    values = np.array([1.0, -2.5, 0.375], np.float32)
    (got,) = run_module(parse(text), [bf16_bits(values)])
    np.testing.assert_array_equal(np.asarray(got, np.float32), 2 * values)
