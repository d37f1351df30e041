"""The reference interpreter's contractions, windows and layout ops, against
naive loop implementations written here and hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
from reference_programs import run_op, ttype

RNG = np.random.default_rng(7)

# --- contractions --------------------------------------------------------------------------


def test_matmul_hand_computed() -> None:
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    b = np.array([[5.0, 6.0], [7.0, 8.0]])
    y = run_op("nn.matmul", a, b, result=ttype([2, 2]))
    np.testing.assert_array_equal(y, [[19.0, 22.0], [43.0, 50.0]])


def test_matmul_broadcasts_batch_dimensions() -> None:
    a = RNG.standard_normal((2, 1, 3, 4))
    b = RNG.standard_normal((5, 4, 2))
    y = run_op("nn.matmul", a, b, result=ttype([2, 5, 3, 2]))
    for i in range(2):
        for j in range(5):
            for m in range(3):
                for n in range(2):
                    expected = sum(a[i, 0, m, k] * b[j, k, n] for k in range(4))
                    assert y[i, j, m, n] == pytest.approx(expected, rel=1e-12, abs=1e-12)


def naive_conv2d(
    x: np.ndarray,
    w: np.ndarray,
    strides: tuple[int, int],
    pads: tuple[int, int, int, int],
    dilations: tuple[int, int],
    groups: int,
) -> np.ndarray:
    """Cross-correlation by definition: one output element at a time."""
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    top, left, bottom, right = pads
    oh = (h + top + bottom - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + left + right - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    out = np.zeros((n, o, oh, ow))
    per_group = o // groups
    for b, f, r, s in np.ndindex(n, o, oh, ow):
        g = f // per_group
        for ci, i, j in np.ndindex(cg, kh, kw):
            row = r * strides[0] - top + i * dilations[0]
            col = s * strides[1] - left + j * dilations[1]
            if 0 <= row < h and 0 <= col < wd:
                out[b, f, r, s] += x[b, g * cg + ci, row, col] * w[f, ci, i, j]
    return out


def conv(
    x: np.ndarray,
    w: np.ndarray,
    strides: tuple[int, int] = (1, 1),
    pads: tuple[int, int, int, int] = (0, 0, 0, 0),
    dilations: tuple[int, int] = (1, 1),
    groups: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """The interpreter's conv2d and the naive one, for the same arguments."""
    expected = naive_conv2d(x, w, strides, pads, dilations, groups)
    attrs = (
        f"strides = {list(strides)}, pads = {list(pads)}, dilations = {list(dilations)}, "
        f"groups = {groups}"
    )
    got = run_op("nn.conv2d", x, w, result=ttype(expected.shape), attrs=attrs)
    return got, expected


def test_conv2d_ones_with_padding_counts_taps() -> None:
    # A 3x3 all-ones kernel over an all-ones 3x3 image padded by 1 counts the
    # real pixels under each window: 4 in corners, 6 on edges, 9 in the middle.
    got, _ = conv(np.ones((1, 1, 3, 3)), np.ones((1, 1, 3, 3)), pads=(1, 1, 1, 1))
    np.testing.assert_array_equal(got[0, 0], [[4, 6, 4], [6, 9, 6], [4, 6, 4]])


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "strides", "pads", "dilations", "groups"),
    [
        ((2, 3, 6, 5), (4, 3, 3, 2), (1, 1), (0, 0, 0, 0), (1, 1), 1),
        ((1, 4, 7, 7), (6, 2, 3, 3), (2, 1), (1, 0, 2, 1), (1, 2), 2),
        ((1, 3, 5, 6), (3, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 3),
        ((2, 2, 6, 6), (4, 1, 2, 3), (2, 2), (0, 2, 1, 0), (2, 1), 2),
        ((1, 4, 8, 8), (4, 4, 1, 1), (3, 2), (0, 0, 0, 0), (1, 1), 1),
    ],
    ids=["plain", "grouped-strided-dilated", "depthwise-padded", "depthwise-x2", "1x1-strided"],
)
def test_conv2d_matches_naive_loops(
    x_shape: tuple[int, int, int, int],
    w_shape: tuple[int, int, int, int],
    strides: tuple[int, int],
    pads: tuple[int, int, int, int],
    dilations: tuple[int, int],
    groups: int,
) -> None:
    got, expected = conv(
        RNG.standard_normal(x_shape), RNG.standard_normal(w_shape),
        strides, pads, dilations, groups,
    )
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


# --- pools ---------------------------------------------------------------------------------


def naive_pool(
    x: np.ndarray,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    pads: tuple[int, int, int, int],
    reduce: str,
) -> np.ndarray:
    """Pooling by definition over the real (unpadded) pixels of each window."""
    n, c, h, w = x.shape
    top, left, bottom, right = pads
    oh = (h + top + bottom - kernel[0]) // strides[0] + 1
    ow = (w + left + right - kernel[1]) // strides[1] + 1
    out = np.zeros((n, c, oh, ow))
    for b, ch, r, s in np.ndindex(n, c, oh, ow):
        r0, s0 = r * strides[0] - top, s * strides[1] - left
        window = x[b, ch, max(r0, 0) : r0 + kernel[0], max(s0, 0) : s0 + kernel[1]]
        out[b, ch, r, s] = window.max() if reduce == "max" else window.mean()
    return out


def pool(
    op: str, x: np.ndarray, kernel: tuple[int, int], strides: tuple[int, int],
    pads: tuple[int, int, int, int],
) -> tuple[np.ndarray, np.ndarray]:
    expected = naive_pool(x, kernel, strides, pads, "max" if op == "nn.max_pool2d" else "avg")
    attrs = f"kernel = {list(kernel)}, strides = {list(strides)}, pads = {list(pads)}"
    return run_op(op, x, result=ttype(expected.shape), attrs=attrs), expected


def test_avg_pool_does_not_count_padding() -> None:
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    got, _ = pool("nn.avg_pool2d", x, (3, 3), (1, 1), (1, 1, 1, 1))
    # Top-left window holds 0, 1, 4, 5 and five padded zeros: 10 / 4, not 10 / 9.
    assert got[0, 0, 0, 0] == 2.5
    # The bottom-right one holds 10, 11, 14, 15.
    assert got[0, 0, 3, 3] == 12.5
    # An interior window holds 9 real pixels around 5.
    assert got[0, 0, 1, 1] == 5.0


def test_max_pool_padding_never_wins() -> None:
    x = -1.0 - np.arange(16.0).reshape(1, 1, 4, 4)  # all negative
    got, _ = pool("nn.max_pool2d", x, (3, 3), (2, 2), (1, 1, 1, 1))
    np.testing.assert_array_equal(got[0, 0], [[-1.0, -2.0], [-5.0, -6.0]])


@pytest.mark.parametrize("op", ["nn.max_pool2d", "nn.avg_pool2d"])
@pytest.mark.parametrize(
    ("kernel", "strides", "pads"),
    [
        ((2, 2), (2, 2), (0, 0, 0, 0)),
        ((3, 2), (2, 1), (1, 0, 2, 1)),
        ((3, 3), (1, 1), (2, 2, 2, 2)),
    ],
)
def test_pools_match_naive_loops(
    op: str, kernel: tuple[int, int], strides: tuple[int, int], pads: tuple[int, int, int, int]
) -> None:
    got, expected = pool(op, RNG.standard_normal((2, 3, 6, 5)), kernel, strides, pads)
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-14)


# --- layout ----------------------------------------------------------------------------------


def test_reshape_keeps_row_major_order() -> None:
    y = run_op("nn.reshape", np.arange(6.0).reshape(2, 3), result=ttype([3, 2]))
    np.testing.assert_array_equal(y, [[0, 1], [2, 3], [4, 5]])


def test_broadcast_to() -> None:
    y = run_op("nn.broadcast_to", np.array([[1.0], [2.0]]), result=ttype([3, 2, 2]))
    assert y.shape == (3, 2, 2)
    assert all(y[i, j, k] == j + 1 for i, j, k in np.ndindex(3, 2, 2))


def test_transpose_result_dim_i_is_operand_dim_perm_i() -> None:
    x = RNG.standard_normal((2, 3, 4))
    y = run_op("nn.transpose", x, result=ttype([4, 2, 3]), attrs="perm = [2, 0, 1]")
    assert all(y[k, i, j] == x[i, j, k] for i, j, k in np.ndindex(2, 3, 4))


def test_slice_with_strides_and_default_strides() -> None:
    x = np.arange(20.0).reshape(4, 5)
    y = run_op(
        "nn.slice", x, result=ttype([2, 2]),
        attrs="starts = [1, 0], limits = [4, 4], strides = [2, 3]",
    )
    np.testing.assert_array_equal(y, [[5, 8], [15, 18]])
    z = run_op("nn.slice", x, result=ttype([1, 2]), attrs="starts = [3, 2], limits = [4, 4]")
    np.testing.assert_array_equal(z, [[17, 18]])


def test_concat_along_negative_axis() -> None:
    a, b = np.zeros((2, 1)), np.ones((2, 2))
    y = run_op("nn.concat", a, b, np.full((2, 1), 2.0), result=ttype([2, 4]), attrs="axis = -1")
    np.testing.assert_array_equal(y, [[0, 1, 1, 2], [0, 1, 1, 2]])


def test_gather_rows_with_2d_indices() -> None:
    table = np.arange(12.0).reshape(4, 3)
    ids = np.array([[3, 0], [1, 1]], dtype=np.int64)
    y = run_op("nn.gather", table, ids, result=ttype([2, 2, 3]), attrs="axis = 0")
    np.testing.assert_array_equal(y[0, 0], [9, 10, 11])
    np.testing.assert_array_equal(y[1, 1], [3, 4, 5])


def test_gather_along_axis_one_with_i32_and_negative_index() -> None:
    table = np.arange(12.0).reshape(3, 4)
    ids = np.array([-1, 0], dtype=np.int32)
    y = run_op("nn.gather", table, ids, result=ttype([3, 2]), attrs="axis = 1")
    np.testing.assert_array_equal(y, [[3, 0], [7, 4], [11, 8]])


def test_gather_out_of_range_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="index 4 is out of range for axis 0 of size 4"):
        run_op(
            "nn.gather", np.zeros((4, 2)), np.array([1, 4], dtype=np.int64),
            result=ttype([2, 2]),
        )
