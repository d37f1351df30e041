"""A pointwise kernel that computes a concat walks each operand in its own
order (scheduling/concat_segments.py): blocks of whole rows visiting every
operand in turn where a row of the result is narrower than a block's chunk,
else one segment of blocks per operand; never a per-element branch over the
operands. Each program runs in numba's CUDA simulator against the reference
interpreter, with its kernel count asserted, for concats along every axis of
odd and prime extents, in f32 and bf16.
"""

from __future__ import annotations

import itertools

import codegen_harness as harness
import pytest

from fusec.analysis.program import Program
from tests.test_concat_fusion import HALF_TOLERANCE, PIPELINE
from tests.test_pointwise_views import TOLERANCE, t

SEGMENTED = "one segment of blocks per operand of the concat"
ROWS = "per block, each operand's part of them in turn"  # then its elements per thread


def by_operand(source: str) -> bool:
    """Whether the kernel walks the concat's operands in their own order, in
    either layout, and never branches per element over them."""
    return (SEGMENTED in source or ROWS in source) and "_sel = " not in source


def check(text: str, launches: int, dtype: str, seed: int) -> Program:
    """`launches` kernels, numbers as the reference's on inputs of `seed`."""
    if dtype == "f32":
        return harness.check_program(text, launches, PIPELINE, seed=seed, tolerance=TOLERANCE)
    return harness.check_program(text, launches, PIPELINE, seed=seed, rtol=HALF_TOLERANCE,
                                 atol=HALF_TOLERANCE)


def three_parts(shape: tuple[int, ...], widths: tuple[int, int, int], axis: int,
                dtype: str) -> str:
    """`tanh(x)`, `y`, and `z * 2` concatenated along `axis`, then a bias
    along axis 0 and a sigmoid (the bias indexed at the result's coordinates)."""
    parts = [tuple(w if d == axis else n for d, n in enumerate(shape)) for w in widths]
    out = tuple(sum(widths) if d == axis else n for d, n in enumerate(shape))
    ta, tb, tc, to = (t(p, dtype) for p in (*parts, out))
    tbias = t((out[0],) + (1,) * (len(shape) - 1), dtype)
    ts = t((), dtype)
    return (f"func.func @f(%x: {ta}, %y: {tb}, %z: {tc}, %b: {tbias}) -> {to} {{\n"
            f"  %a = nn.tanh %x : {ta}\n"
            f"  %two = nn.constant dense<2.0> : {ts}\n"
            f"  %c = nn.mul %z, %two : ({tc}, {ts}) -> {tc}\n"
            f"  %cat = nn.concat %a, %y, %c {{axis = {axis}}} : ({ta}, {tb}, {tc}) -> {to}\n"
            f"  %s = nn.add %cat, %b : ({to}, {tbias}) -> {to}\n"
            f"  %r = nn.sigmoid %s : {to}\n"
            f"  func.return %r : {to}\n}}\n")


@pytest.mark.parametrize(("axis", "dtype"), list(itertools.product(range(3), ("f32", "bf16"))))
def test_concat_of_three_parts_along_every_axis(axis: int, dtype: str) -> None:
    """Widths 2, 1 and 4 over a 3x5x7 tensor: one kernel, one segment per
    operand, every element where the reference has it."""
    program = check(three_parts((3, 5, 7), (2, 1, 4), axis, dtype), 1, dtype, seed=axis)
    assert by_operand(program.kernels_source)


def roll(shape: tuple[int, ...], axis: int, shift: int, dtype: str) -> str:
    """`relu(concat(x[shift:], x[:shift]) * x)` of `x = x0 * 1.25` along `axis`."""
    n = shape[axis]

    def sl(start: int, stop: int) -> tuple[str, str]:
        starts = [start if d == axis else 0 for d in range(len(shape))]
        limits = [stop if d == axis else s for d, s in enumerate(shape)]
        part = tuple(stop - start if d == axis else s for d, s in enumerate(shape))
        return f"{{starts = {starts}, limits = {limits}}}", t(part, dtype)
    (tail_attr, t_tail), (head_attr, t_head) = sl(shift, n), sl(0, shift)
    tx, ts = t(shape, dtype), t((), dtype)
    return (f"func.func @f(%x0: {tx}) -> {tx} {{\n"
            f"  %k = nn.constant dense<1.25> : {ts}\n"
            f"  %x = nn.mul %x0, %k : ({tx}, {ts}) -> {tx}\n"
            f"  %tl = nn.slice %x {tail_attr} : ({tx}) -> {t_tail}\n"
            f"  %hd = nn.slice %x {head_attr} : ({tx}) -> {t_head}\n"
            f"  %c = nn.concat %tl, %hd {{axis = {axis}}} : ({t_tail}, {t_head}) -> {tx}\n"
            f"  %m = nn.mul %c, %x0 : ({tx}, {tx}) -> {tx}\n"
            f"  %r = nn.relu %m : {tx}\n"
            f"  func.return %r : {tx}\n}}\n")


@pytest.mark.parametrize(("axis", "dtype"), list(itertools.product(range(3), ("f32", "bf16"))))
def test_roll_of_a_computed_value_along_every_axis(axis: int, dtype: str) -> None:
    """A roll by 2 of a 5x3x7 tensor the kernel scales: the epilogue reads
    the input again at the result's coordinates."""
    shape = (5, 3, 7)
    program = check(roll(shape, axis, 2, dtype), 1, dtype, seed=10 + axis)
    assert by_operand(program.kernels_source)


def test_concat_that_is_also_a_result() -> None:
    """The concat itself is returned beside a value computed from it: both
    stored at the result's coordinates, from each segment."""
    ta, tb, to = t((3, 5)), t((3, 2)), t((3, 7))
    program = check(f"func.func @f(%x: {ta}, %y: {tb}) -> ({to}, {to}) {{\n"
                    f"  %a = nn.exp %x : {ta}\n"
                    f"  %c = nn.concat %a, %y {{axis = 1}} : ({ta}, {tb}) -> {to}\n"
                    f"  %r = nn.neg %c : {to}\n"
                    f"  func.return %c, %r : {to}, {to}\n}}\n", 1, "f32", seed=21)
    assert program.kernels_source.count("# operand ") == 2


def test_rows_past_one_block() -> None:
    """Operands of 11x37 and 11x41: rows of 78 elements, several blocks of
    whole rows, the last one partial."""
    ta, tb, to = t((11, 37)), t((11, 41)), t((11, 78))
    program = check(f"func.func @f(%x: {ta}, %y: {tb}) -> {to} {{\n"
                    f"  %a = nn.silu %x : {ta}\n"
                    f"  %b = nn.abs %y : {tb}\n"
                    f"  %c = nn.concat %a, %b {{axis = 1}} : ({ta}, {tb}) -> {to}\n"
                    f"  func.return %c : {to}\n}}\n", 1, "f32", seed=31)
    assert ROWS in program.kernels_source and by_operand(program.kernels_source)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_rows_wider_than_a_block_get_a_segment_per_operand(dtype: str) -> None:
    """Rows of 1601 elements (operands 3x701 and 3x900): one segment of
    blocks per operand, several blocks each, the last of each partial."""
    ta, tb, to = t((3, 701), dtype), t((3, 900), dtype), t((3, 1601), dtype)
    program = check(f"func.func @f(%x: {ta}, %y: {tb}) -> {to} {{\n"
                    f"  %a = nn.exp %x : {ta}\n"
                    f"  %c = nn.concat %a, %y {{axis = 1}} : ({ta}, {tb}) -> {to}\n"
                    f"  %r = nn.tanh %c : {to}\n"
                    f"  func.return %r : {to}\n}}\n", 1, dtype, seed=71)
    assert SEGMENTED in program.kernels_source and by_operand(program.kernels_source)
