"""Interleaves (`concat` of `[..., n, 1]` pieces along a new last axis,
merged to `[..., 2n]`) with pointwise ops before and after: `sink-transposes`
moves the pieces' ops below their unit reshapes and lifts the ops after the
merge above it (passes/sink_transposes.py), so one kernel computes the concat
and its neighbours and the merged result is a view of its output. Each
program runs in numba's CUDA simulator against the reference interpreter,
with its kernel count asserted, at odd and prime extents, in f32 and bf16.
"""

from __future__ import annotations

import itertools

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
    assert "per block, each operand's part of them in turn" in source
    assert "_sel = " not in source
