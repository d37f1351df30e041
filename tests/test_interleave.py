"""Interleaves (`concat` of `[..., n, 1]` pieces along a new last axis,
merged to `[..., 2n]`) with pointwise ops before and after: `sink-transposes`
moves the pieces' ops below their unit reshapes and lifts the ops after the
merge above it (passes/sink_transposes.py), so one kernel computes the concat
and its neighbours and the merged result is a view of its output; each
access of that kernel is one whole row of the concat, stored as one word
(`scheduling/concat_rows.py`). Each program runs in numba's CUDA simulator
against the reference interpreter, with its kernel count asserted, at odd
and prime extents, in f32 and bf16.
"""

from __future__ import annotations

import itertools
import re

import codegen_harness as harness
import pytest

from tests.test_concat_fusion import HALF_TOLERANCE
from tests.test_pointwise_views import TOLERANCE, t

PIPELINE = ("decompose,sink-transposes,cse,dce,form-fusion-groups,group-each-op,"
            "tile-and-promote")


def interleave(shape: tuple[int, ...], dtype: str) -> str:
    """`sigmoid((interleave(x + 1.25, tanh(y * -0.75)) + b) * d)`, `b` a bias
    over the rows (`[rows, 1]`), `d` one over the merged axis."""
    *lead, n = shape
    tx, tr = t(shape, dtype), t((*shape, 1), dtype)
    tc, to = t((*shape, 2), dtype), t((*lead, 2 * n), dtype)
    tb, td, ts = t((lead[-1], 1), dtype), t((2 * n,), dtype), t((), dtype)
    return (f"func.func @f(%x: {tx}, %y: {tx}, %b: {tb}, %d: {td}) -> {to} {{\n"
            f"  %k = nn.constant dense<1.25> : {ts}\n"
            f"  %xa = nn.add %x, %k : ({tx}, {ts}) -> {tx}\n"
            f"  %q = nn.constant dense<-0.75> : {ts}\n"
            f"  %ym = nn.mul %y, %q : ({tx}, {ts}) -> {tx}\n"
            f"  %yt = nn.tanh %ym : {tx}\n"
            f"  %xr = nn.reshape %xa : ({tx}) -> {tr}\n"
            f"  %yr = nn.reshape %yt : ({tx}) -> {tr}\n"
            f"  %c = nn.concat %xr, %yr {{axis = {len(shape)}}} : ({tr}, {tr}) -> {tc}\n"
            f"  %m = nn.reshape %c : ({tc}) -> {to}\n"
            f"  %a = nn.add %m, %b : ({to}, {tb}) -> {to}\n"
            f"  %p = nn.mul %a, %d : ({to}, {td}) -> {to}\n"
            f"  %r = nn.sigmoid %p : {to}\n"
            f"  func.return %r : {to}\n}}\n")


@pytest.mark.parametrize(("shape", "dtype"), itertools.product(
    [(7, 13), (3, 5, 11)], ("f32", "bf16")))
def test_interleave_with_neighbours_is_one_kernel(shape: tuple[int, ...], dtype: str) -> None:
    tol = TOLERANCE["float32"] if dtype == "f32" else HALF_TOLERANCE
    program = harness.check_program(interleave(shape, dtype), 1, PIPELINE,
                                    seed=sum(shape), rtol=tol, atol=tol)
    source = program.kernels_source
    if dtype == "f32":  # a row of 2 floats is one 8-byte store
        assert "rows of the concat along axis" in source and "stored as one word" in source
        assert "st_vec2_f32(" in source
    else:  # 2 halves, 4 bytes: each operand's part of the block's rows in turn
        assert "per block, each operand's part of them in turn" in source
    assert "_sel = " not in source


def row_concat(lead: tuple[int, ...], widths: tuple[int, ...], dtype: str) -> str:
    """`concat(tanh(x0), x1 * 2, ...)` along the last axis, operand `k`
    `widths[k]` wide, plus a bias over the rows."""
    ts = t((), dtype)
    ins = [t((*lead, w), dtype) for w in widths]
    to, tb = t((*lead, sum(widths)), dtype), t((*lead[-1:], 1), dtype)
    params = ", ".join(f"%x{k}: {ty}" for k, ty in enumerate(ins))
    lines = [f"func.func @f({params}, %b: {tb}) -> {to} {{",
             f"  %two = nn.constant dense<2.0> : {ts}"]
    for k, ty in enumerate(ins):
        op = f"nn.tanh %x{k} : {ty}" if k % 2 == 0 else (
            f"nn.mul %x{k}, %two : ({ty}, {ts}) -> {ty}")
        lines.append(f"  %p{k} = {op}")
    operands = ", ".join(f"%p{k}" for k in range(len(widths)))
    lines += [f"  %c = nn.concat {operands} {{axis = {len(lead)}}} : "
              f"({', '.join(ins)}) -> {to}",
              f"  %r = nn.add %c, %b : ({to}, {tb}) -> {to}",
              f"  func.return %r : {to}", "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("lead", "widths", "dtype", "store"), [
    ((5, 7), (1, 1, 1, 1), "f32", "st_vec4_f32("),  # 4 floats: one 16-byte store
    ((9, 3), (2, 2), "f32", "st_vec4_f32("),
    ((3, 11), (1, 3), "bf16", "st_wide64("),  # 4 halves: 8 bytes
    ((4, 5), (3, 1, 4), "bf16", "st_vec4_u32("),  # 8 halves: 16 bytes
])
def test_a_row_of_one_word_is_one_store(lead: tuple[int, ...], widths: tuple[int, ...],
                                       dtype: str, store: str) -> None:
    tol = TOLERANCE["float32"] if dtype == "f32" else HALF_TOLERANCE
    program = harness.check_program(row_concat(lead, widths, dtype), 1, PIPELINE,
                                    seed=sum(widths) + len(lead), rtol=tol, atol=tol)
    source = program.kernels_source
    assert f"each row's {sum(widths)} elements stored as one word" in source
    assert store in source


@pytest.mark.parametrize(("widths", "dtype"), [((1, 2), "f32"), ((3, 2), "f32"),
                                               ((8, 8), "bf16"), ((1, 1), "bf16")])
def test_rows_of_other_widths_keep_the_segments(widths: tuple[int, ...], dtype: str) -> None:
    """3 or 5 floats and 16 halves are no one word, and 2 halves are fewer
    than 8 bytes: each operand's part of the block's rows in turn."""
    tol = TOLERANCE["float32"] if dtype == "f32" else HALF_TOLERANCE
    program = harness.check_program(row_concat((6, 5), widths, dtype), 1, PIPELINE,
                                    seed=len(widths), rtol=tol, atol=tol)
    source = program.kernels_source
    assert "per block, each operand's part of them in turn" in source
    assert "stored as one word" not in source


@pytest.mark.parametrize("dtype", ["f32"])
def test_rows_of_a_plain_interleave_need_no_unravel(dtype: str) -> None:
    """Every access steps across the rows' dimensions alike (no operand
    broadcast over them): a row's coordinate is its word's, and the kernel
    divides by no extent of `5 x 7 x 13` (`analysis/index_runs.row_runs`)."""
    ts, tx, tr = t((), dtype), t((5, 7, 13), dtype), t((5, 7, 13, 1), dtype)
    tc, to = t((5, 7, 13, 2), dtype), t((5, 7, 26), dtype)
    text = (f"func.func @f(%x: {tx}, %y: {tx}) -> {to} {{\n"
            f"  %k = nn.constant dense<1.25> : {ts}\n"
            f"  %xa = nn.add %x, %k : ({tx}, {ts}) -> {tx}\n"
            f"  %xr = nn.reshape %xa : ({tx}) -> {tr}\n"
            f"  %yr = nn.reshape %y : ({tx}) -> {tr}\n"
            f"  %c = nn.concat %xr, %yr {{axis = 3}} : ({tr}, {tr}) -> {tc}\n"
            f"  %m = nn.reshape %c : ({tc}) -> {to}\n"
            f"  func.return %m : {to}\n}}\n")
    tol = TOLERANCE["float32"] if dtype == "f32" else HALF_TOLERANCE
    source = harness.check_program(text, 1, PIPELINE, seed=3, rtol=tol, atol=tol).kernels_source
    assert "stored as one word" in source
    divisors = set(re.findall(r"// uint32\((\d+)\)", source))
    assert divisors <= {"2"}, divisors
