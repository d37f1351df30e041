"""`nn.concat` and `nn.gather` read in place by the kernel consuming them
(analysis/view_operands.py `INDEXED_READS`, codegen/indexed_read.py): each
program runs in numba's CUDA simulator against the reference interpreter,
as fewer kernels than one copy kernel plus its consumer.
"""

from __future__ import annotations

import codegen_harness as harness
import numpy as np
import pytest

from fusec.reference.interpreter import run_module
from fusec.runtime.executor import run_program
from tests.test_pointwise_views import PIPELINE, check, t


def concat(parts: list[tuple[int, ...]], axis: int, tail: str, ret: str = "%r",
           extra: str = "") -> str:
    """`%c = concat(%x0, %x1, ...)` along `axis`, then `tail` (which defines
    `%r`, may use `%c`); returns `ret`."""
    out = list(parts[0])
    out[axis] = sum(p[axis] for p in parts)
    tc = t(tuple(out))
    args = ", ".join(f"%x{k}: {t(p)}" for k, p in enumerate(parts))
    names = ", ".join(f"%x{k}" for k in range(len(parts)))
    types = ", ".join(t(p) for p in parts)
    rtype = tc if ret == "%r" or ret == "%c" else ret.split(":")[1]
    rets = ret.split(":")[0]
    return (f"func.func @f({args}{extra}) -> {rtype} {{\n"
            f"  %c = nn.concat {names} {{axis = {axis}}} : ({types}) -> {tc}\n"
            + tail.replace("TC", tc) + f"  func.return {rets} : {rtype}\n}}\n")


SCALE_RELU = ("  %m = nn.mul %c, %c : (TC, TC) -> TC\n"
              "  %r = nn.relu %m : TC\n")


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_concat_of_two_feeds_pointwise(axis: int) -> None:
    a, b = [2, 3, 4], [2, 3, 4]
    b[axis] = 5
    check(concat([tuple(a), tuple(b)], axis, SCALE_RELU))


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_concat_of_three_feeds_pointwise(axis: int) -> None:
    parts = [[3, 2, 4], [3, 2, 4], [3, 2, 4]]
    for k, p in enumerate(parts):
        p[axis] = k + 1
    check(concat([tuple(p) for p in parts], axis, SCALE_RELU))


def test_channel_concat_with_per_channel_scale() -> None:
    """concat_act at a tiny shape: NCHW channel concat, scale [C, 1, 1], relu."""
    ts = t((7, 1, 1))
    tail = ("  %m = nn.mul %c, %s : (TC, " + ts + ") -> TC\n  %r = nn.relu %m : TC\n")
    check(concat([(2, 4, 3, 3), (2, 3, 3, 3)], 1, tail, extra=f", %s: {ts}"))


@pytest.mark.parametrize("axis", [0, 1])
def test_concat_feeds_row_reduction(axis: int) -> None:
    """A softmax-like row: the sum over the last axis reads the concat."""
    parts = [[2, 3, 8], [2, 3, 8], [2, 3, 8]]
    for k, p in enumerate(parts):
        p[axis] = k + 1
    out = list(parts[0])
    out[axis] = 6  # 1 + 2 + 3
    tk = t((*out[:2], 1))
    tail = ("  %e = nn.exp %c : TC\n"
            f"  %s = nn.reduce_sum %e {{axes = [2], keepdims = true}} : (TC) -> {tk}\n"
            f"  %r = nn.div %e, %s : (TC, {tk}) -> TC\n")
    check(concat([tuple(p) for p in parts], axis, tail))


def test_concat_along_the_reduced_axis() -> None:
    tail = ("  %e = nn.mul %c, %c : (TC, TC) -> TC\n"
            f"  %r = nn.reduce_sum %e {{axes = [1], keepdims = true}} : (TC) -> {t((4, 1))}\n")
    check(concat([(4, 5), (4, 3)], 1, tail, ret=f"%r:{t((4, 1))}"))


def test_concat_of_slices_and_reshapes() -> None:
    """Operands that are themselves views of group inputs."""
    tx, ty, tc = t((4, 10)), t((2, 2, 3)), t((4, 8))
    check(f"func.func @f(%x: {tx}, %y: {ty}) -> {tc} {{\n"
          f"  %a = nn.slice %x {{starts = [0, 1], limits = [4, 6], strides = [1, 1]}} "
          f": ({tx}) -> {t((4, 5))}\n"
          f"  %b = nn.reshape %y : ({ty}) -> {t((4, 3))}\n"
          f"  %c = nn.concat %a, %b {{axis = 1}} : ({t((4, 5))}, {t((4, 3))}) -> {tc}\n"
          f"  %r = nn.tanh %c : {tc}\n"
          f"  func.return %r : {tc}\n}}\n")


def test_concat_result_also_returned() -> None:
    """The concat is stored by the fused kernel too (a returned value)."""
    tc = t((3, 7))
    program = check(f"func.func @f(%x: {t((3, 4))}, %y: {t((3, 3))}) -> ({tc}, {tc}) {{\n"
                    f"  %c = nn.concat %x, %y {{axis = 1}} : ({t((3, 4))}, {t((3, 3))}) -> {tc}\n"
                    f"  %r = nn.sigmoid %c : {tc}\n"
                    f"  func.return %c, %r : {tc}, {tc}\n}}\n")
    assert program.kernels_source.count("out1[") >= 1


def gather(table: tuple[int, ...], ids: tuple[int, ...], axis: int, itype: str,
           tail: str, out: tuple[int, ...], extra: str = "", ret: str = "") -> str:
    tt, ti, to = t(table), t(ids, itype), t(out)
    rt = ret or to
    return (f"func.func @f(%tab: {tt}, %ids: {ti}{extra}) -> {rt} {{\n"
            f"  %e = nn.gather %tab, %ids {{axis = {axis}}} : ({tt}, {ti}) -> {to}\n"
            + tail.replace("TO", to) + f"  func.return %r : {rt}\n}}\n")


@pytest.mark.parametrize("itype", ["i32", "i64"])
def test_gather_rows_feed_pointwise(itype: str) -> None:
    """Embedding rows (12 ids over 5 rows: repeated) plus a positional add."""
    tp = t((4, 6))
    tail = f"  %r = nn.add %e, %p : (TO, {tp}) -> TO\n"
    check(gather((5, 6), (3, 4), 0, itype, tail, (3, 4, 6), extra=f", %p: {tp}"))


@pytest.mark.parametrize("itype", ["i32", "i64"])
def test_gather_middle_axis_feeds_pointwise(itype: str) -> None:
    tail = "  %r = nn.tanh %e : TO\n"
    check(gather((2, 5, 3), (4,), 1, itype, tail, (2, 4, 3)))


@pytest.mark.parametrize("itype", ["i32", "i64"])
def test_embedding_layer_norm_is_one_kernel(itype: str) -> None:
    """emb_ln at a tiny shape: the layer norm's row schedule reads
    `table[ids[row], j]`."""
    to, tp, tg = t((2, 3, 16)), t((3, 16)), t((16,))
    text = (f"func.func @f(%ids: {t((2, 3), itype)}, %tab: {t((4, 16))}, %p: {tp}, "
            f"%g: {tg}, %b: {tg}) -> {to} {{\n"
            f"  %e = nn.gather %tab, %ids {{axis = 0}} : ({t((4, 16))}, "
            f"{t((2, 3), itype)}) -> {to}\n"
            f"  %h = nn.add %e, %p : ({to}, {tp}) -> {to}\n"
            f"  %y = nn.layer_norm %h, %g, %b {{axis = -1, epsilon = 1.0e-05}} : "
            f"({to}, {tg}, {tg}) -> {to}\n"
            f"  func.return %y : {to}\n}}\n")
    program = check(text)
    assert "min(max(" in program.kernels_source  # the clamped row index


def test_gather_middle_axis_feeds_reduction() -> None:
    tail = (f"  %x = nn.exp %e : TO\n"
            f"  %r = nn.reduce_sum %x {{axes = [2], keepdims = false}} : (TO) -> {t((2, 4))}\n")
    check(gather((2, 5, 3), (4,), 1, "i64", tail, (2, 4, 3), ret=t((2, 4))))


def test_gather_negative_indices_wrap_once() -> None:
    """Negative indices count from the end once, as numpy.take and the
    reference interpreter do."""
    text = gather((5, 3), (6,), 0, "i64", "  %r = nn.neg %e : TO\n", (6, 3))
    program = harness.compile_text(text, PIPELINE)
    assert len(program.functions["f"].launches) == 1
    table = np.arange(15, dtype=np.float32).reshape(5, 3) + 1
    ids = np.array([0, -1, 4, -5, 2, 2], dtype=np.int64)
    reference = harness.parse_module(harness.make_context(), text, "test.mlir")
    expected = run_module(reference, [table, ids], "f")
    got = run_program(program, "f", [table, ids], device="sim")
    np.testing.assert_array_equal(got[0], expected[0])



@pytest.mark.parametrize("axis", [0, 1])
def test_concat_feeds_column_reduction(axis: int) -> None:
    """Column statistics (reduced axis 0) of a concat along either axis."""
    parts = [(3, 4), (2, 4)] if axis == 0 else [(5, 3), (5, 1)]
    tail = ("  %e = nn.mul %c, %c : (TC, TC) -> TC\n"
            f"  %r = nn.reduce_sum %e {{axes = [0], keepdims = true}} : (TC) -> {t((1, 4))}\n")
    check(concat(parts, axis, tail, ret=f"%r:{t((1, 4))}"))
