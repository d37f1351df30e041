"""Slices, reshapes and broadcasts of values read from memory fold into
pointwise groups as strided views (analysis/view_operands.py,
codegen/pointwise_transpose.py's flat path): each program below runs in
numba's CUDA simulator against the reference interpreter as ONE kernel, where
the slices used to run as copy kernels of their own.
"""

from __future__ import annotations

import codegen_harness as harness

from fusec.analysis.program import Program
from fusec.analysis.view_operands import bytes_read

# group-each-op: an op form-fusion-groups leaves alone still gets a kernel.
PIPELINE = "decompose,form-fusion-groups,group-each-op,tile-and-promote"
TOLERANCE = {"float32": 2e-5, "float16": 2e-3}


def t(shape: tuple[int, ...], dtype: str = "f32") -> str:
    """`tensor<...>` of `shape`."""
    return harness.tensor(shape, dtype)


def check(text: str, launches: int = 1) -> Program:
    """`launches` kernels, numbers as the reference's."""
    return harness.check_program(text, launches, PIPELINE, tolerance=TOLERANCE)


def swiglu(rows: int, cols: int, dtype: str = "f32") -> str:
    """`silu(h[:, :cols]) * h[:, cols:]`."""
    th, to = t((rows, 2 * cols), dtype), t((rows, cols), dtype)
    return (f"func.func @f(%h: {th}) -> {to} {{\n"
            f"  %a = nn.slice %h {{starts = [0, 0], limits = [{rows}, {cols}], "
            f"strides = [1, 1]}} : ({th}) -> {to}\n"
            f"  %b = nn.slice %h {{starts = [0, {cols}], limits = [{rows}, {2 * cols}], "
            f"strides = [1, 1]}} : ({th}) -> {to}\n"
            f"  %s = nn.silu %a : {to}\n"
            f"  %g = nn.mul %s, %b : ({to}, {to}) -> {to}\n"
            f"  func.return %g : {to}\n}}\n")


def test_swiglu_gate_on_two_slices() -> None:
    program = check(swiglu(5, 7))
    assert "in0[uint32(7) + " in program.kernels_source  # the second half at its offset


def test_swiglu_half() -> None:
    check(swiglu(3, 9, "f16"))


def test_strided_slice_step_two() -> None:
    tx, to = t((6, 14)), t((3, 7))
    check(f"func.func @f(%x: {tx}, %y: {to}) -> {to} {{\n"
          f"  %s = nn.slice %x {{starts = [1, 0], limits = [6, 14], strides = [2, 2]}} "
          f": ({tx}) -> {to}\n"
          f"  %r = nn.add %s, %y : ({to}, {to}) -> {to}\n"
          f"  func.return %r : {to}\n}}\n")


def test_slice_then_broadcast() -> None:
    tx, ts, to = t((5, 9)), t((5, 1)), t((5, 8))
    check(f"func.func @f(%x: {tx}, %y: {to}) -> {to} {{\n"
          f"  %s = nn.slice %x {{starts = [0, 8], limits = [5, 9], strides = [1, 1]}} "
          f": ({tx}) -> {ts}\n"
          f"  %b = nn.broadcast_to %s : ({ts}) -> {to}\n"
          f"  %r = nn.mul %b, %y : ({to}, {to}) -> {to}\n"
          f"  func.return %r : {to}\n}}\n")


def test_reshape_then_add() -> None:
    tx, to = t((6, 10)), t((3, 4, 5))
    check(f"func.func @f(%x: {tx}, %y: {to}) -> {to} {{\n"
          f"  %v = nn.reshape %x : ({tx}) -> {to}\n"
          f"  %e = nn.exp %y : {to}\n"
          f"  %r = nn.add %v, %e : ({to}, {to}) -> {to}\n"
          f"  func.return %r : {to}\n}}\n")


def test_slice_then_reshape_chain() -> None:
    tx, ts, to = t((4, 12)), t((4, 6)), t((4, 2, 3))
    check(f"func.func @f(%x: {tx}, %y: {to}) -> {to} {{\n"
          f"  %s = nn.slice %x {{starts = [0, 3], limits = [4, 9], strides = [1, 1]}} "
          f": ({tx}) -> {ts}\n"
          f"  %v = nn.reshape %s : ({ts}) -> {to}\n"
          f"  %r = nn.sub %v, %y : ({to}, {to}) -> {to}\n"
          f"  func.return %r : {to}\n}}\n")


def test_offset_slice_feeding_multi_output_group() -> None:
    tx, to = t((3, 4, 11)), t((2, 4, 6))
    program = check(
        f"func.func @f(%x: {tx}, %y: {to}) -> ({to}, {to}) {{\n"
        f"  %s = nn.slice %x {{starts = [1, 0, 4], limits = [3, 4, 10], strides = [1, 1, 1]}} "
        f": ({tx}) -> {to}\n"
        f"  %a = nn.add %s, %y : ({to}, {to}) -> {to}\n"
        f"  %m = nn.mul %a, %s : ({to}, {to}) -> {to}\n"
        f"  %n = nn.neg %a : {to}\n"
        f"  func.return %m, %n : {to}, {to}\n}}\n")
    assert "in0[uint32(48) + " in program.kernels_source  # offset 1 * 44 + 4


def test_a_slice_left_outside_every_group_is_its_own_kernel() -> None:
    """A slice returned as is joins no group (form-fusion-groups leaves it
    alone); the pipeline groups it by itself: a copy kernel beside the gate's."""
    th, to = t((5, 14)), t((5, 7))
    check(f"func.func @f(%h: {th}) -> ({to}, {to}) {{\n"
          f"  %a = nn.slice %h {{starts = [0, 0], limits = [5, 7], strides = [1, 1]}} "
          f": ({th}) -> {to}\n"
          f"  %b = nn.slice %h {{starts = [0, 7], limits = [5, 14], strides = [1, 1]}} "
          f": ({th}) -> {to}\n"
          f"  %s = nn.silu %b : {to}\n"
          f"  func.return %a, %s : {to}, {to}\n}}\n", launches=2)


def test_cost_counts_bytes_the_views_read() -> None:
    """A group reading one half of `h` moves half its bytes, not all of them;
    a step-2 slice along the innermost axis moves whole sectors (all of it)."""
    from fusec.compiler.parsing import make_context, parse_module
    module = parse_module(make_context(), swiglu(4, 8), "test.mlir")
    ops = [op for op in module.walk() if op.name in ("nn.slice", "nn.silu", "nn.mul")]
    h = ops[0].operands[0]
    assert bytes_read(ops, h, 4 * 16 * 4) == 4 * 16 * 4  # both halves
    assert bytes_read(ops[:1] + ops[2:3], h, 4 * 16 * 4) == 4 * 8 * 4  # one half
