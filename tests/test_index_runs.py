"""Dimensions a pointwise kernel with views indexes as one
(`analysis/index_runs.py`): where every access steps across neighbouring
dimensions alike, the flat schedule and a concat's segments unravel one
coordinate for the run, not one per dimension. Each program runs in numba's
CUDA simulator against the reference interpreter (odd and prime extents,
f32 and bf16), and the kernel's divisors say which runs it indexes.
"""

from __future__ import annotations

import re

import codegen_harness as harness
import pytest

from fusec.analysis.group_body import GroupBody
from fusec.analysis.index_runs import index_runs, run_coords
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp
from tests.test_concat_fusion import HALF_TOLERANCE
from tests.test_pointwise_views import TOLERANCE, t

PIPELINE = "decompose,cse,dce,form-fusion-groups,group-each-op,tile-and-promote"


def check(text: str, dtype: str, seed: int) -> str:
    """One kernel, numbers as the reference's; its source."""
    tol = TOLERANCE["float32"] if dtype == "f32" else HALF_TOLERANCE
    program = harness.check_program(text, 1, PIPELINE, seed=seed, rtol=tol, atol=tol)
    return program.kernels_source


def divisors(source: str) -> set[int]:
    """The constants the kernel's coordinates (`c<element>_<k>`) are
    unravelled by, divided or taken the remainder of."""
    return {int(n) for n in re.findall(r"(?m)^\s*c\d+_\d+ = .*?(?://|%) uint32\((\d+)\)",
                                       source)}


def concat_rows(a: tuple[int, ...], b: tuple[int, ...], axis: int, dtype: str,
                bias: tuple[int, ...] | None = None) -> str:
    """`concat(tanh(x), y, axis) * 1.25` (`+ bias` when given)."""
    out = list(a)
    out[axis] += b[axis]
    ta, tb, to, ts = t(a, dtype), t(b, dtype), t(tuple(out), dtype), t((), dtype)
    extra = f", %z: {t(bias, dtype)}" if bias else ""
    lines = [f"func.func @f(%x: {ta}, %y: {tb}{extra}) -> {to} {{",
             f"  %tx = nn.tanh %x : {ta}",
             f"  %c = nn.concat %tx, %y {{axis = {axis}}} : ({ta}, {tb}) -> {to}",
             f"  %k = nn.constant dense<1.25> : {ts}",
             f"  %r = nn.mul %c, %k : ({to}, {ts}) -> {to}"]
    if bias:
        lines += [f"  %s = nn.add %r, %z : ({to}, {t(bias, dtype)}) -> {to}",
                  f"  func.return %s : {to}", "}"]
    else:
        lines += [f"  func.return %r : {to}", "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("dtype", ["f32", pytest.param("bf16", marks=pytest.mark.slow)])  # time
def test_a_concat_segment_indexes_the_rows_inside_the_axis_as_one(dtype: str) -> None:
    """`[37, 54, 53] + [37, 35, 53]` along axis 1: each segment unravels
    `37 x (54 * 53)` (one division by 2862, and by 1855 in the second),
    not three coordinates; the second segment's shift is a constant."""
    source = check(concat_rows((37, 54, 53), (37, 35, 53), 1, dtype), dtype, 5)
    found = divisors(source)
    assert {54 * 53, 35 * 53} <= found and 53 not in found, found


def test_a_bias_along_the_axis_keeps_its_dimension_apart() -> None:
    """A bias over the concat axis (`[89, 1]`) reads the axis' coordinate on
    its own: the segment unravels it, and the numbers stay right."""
    source = check(concat_rows((7, 54, 13), (7, 35, 13), 1, "f32", bias=(89, 1)), "f32", 6)
    assert 13 in divisors(source)


@pytest.mark.parametrize("dtype", ["f32", pytest.param("bf16", marks=pytest.mark.slow)])  # time
def test_a_permutation_indexes_the_axes_it_keeps_together_as_one(dtype: str) -> None:
    """`[29, 19, 11, 5] -> [11, 29, 19, 5]`: 29 and 19 step alike in the
    input and the output (one run of 551), 11 and 5 apart."""
    ti, to = t((29, 19, 11, 5), dtype), t((11, 29, 19, 5), dtype)
    text = (f"func.func @f(%x: {ti}) -> {to} {{\n"
            f"  %p = nn.transpose %x {{perm = [2, 0, 1, 3]}} : ({ti}) -> {to}\n"
            f"  %r = nn.tanh %p : {to}\n"
            f"  func.return %r : {to}\n}}\n")
    source = check(text, dtype, 7)
    found = divisors(source)
    assert 19 * 11 * 5 not in found and 19 not in found, found  # never 29 apart from 19


@pytest.mark.parametrize("dtype", ["f32", pytest.param("bf16", marks=pytest.mark.slow)])  # time
def test_a_roll_segment_indexes_two_runs(dtype: str) -> None:
    """A roll of `[3, 7, 23, 9]` along axis 2 by 5: `3 x 7` and `rows x 9`
    are runs in every segment."""
    shape = (3, 7, 23, 9)
    tx, ts = t(shape, dtype), t((), dtype)
    head, tail = (3, 7, 5, 9), (3, 7, 18, 9)
    text = (f"func.func @f(%x: {tx}) -> {tx} {{\n"
            f"  %k = nn.constant dense<1.25> : {ts}\n"
            f"  %m = nn.mul %x, %k : ({tx}, {ts}) -> {tx}\n"
            f"  %a = nn.slice %m {{starts = [0, 0, 18, 0], limits = [3, 7, 23, 9]}} : "
            f"({tx}) -> {t(head, dtype)}\n"
            f"  %b = nn.slice %m {{starts = [0, 0, 0, 0], limits = [3, 7, 18, 9]}} : "
            f"({tx}) -> {t(tail, dtype)}\n"
            f"  %c = nn.concat %a, %b {{axis = 2}} : ({t(head, dtype)}, {t(tail, dtype)}) "
            f"-> {tx}\n"
            f"  %r = nn.silu %c : {tx}\n"
            f"  func.return %r : {tx}\n}}\n")
    found = divisors(check(text, dtype, 8))
    assert {5 * 9, 18 * 9} <= found and 7 not in found, found


def _body(text: str) -> GroupBody:
    """The body of the one fused group of `text` after the pipeline."""
    ctx = make_context()
    module = parse_module(ctx, text, "t.mlir")
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), PIPELINE)).run(module)
    (group,) = [op for op in module.walk() if isinstance(op, GroupOp)]
    return GroupBody.of(group)


def test_the_runs_of_a_segment_and_the_dimensions_a_gather_keeps_apart() -> None:
    body = _body(concat_rows((5, 4, 7), (5, 3, 7), 1, "f32"))
    (concat,) = [op for op in body.ops if isinstance(op, nn.ConcatOp)]
    assert index_runs(body, (5, 4, 7), (concat, 0)) == ((0,), (1, 2))
    assert index_runs(body, (5, 3, 7), (concat, 1)) == ((0,), (1, 2))
    assert run_coords((5, 4, 7), ((0,), (1, 2))) == [(0, 0), None, (1, 2)]
    assert run_coords((5, 1, 7), None) == [(0, 0), None, (2, 2)]
    tt, ti, to = t((9, 6)), harness.tensor((4,), "i32"), t((9, 4))
    gather = _body(f"func.func @f(%x: {tt}, %i: {ti}) -> {to} {{\n"
                   f"  %g = nn.gather %x, %i {{axis = 1}} : ({tt}, {ti}) -> {to}\n"
                   f"  %r = nn.tanh %g : {to}\n"
                   f"  func.return %r : {to}\n}}\n")
    assert index_runs(gather, (9, 4)) is None
