"""`nn.concat` of values the same kernel computes (analysis/concat_operands.py,
codegen/indexed_read.py `_select`): the pointwise kernel iterates over the
concat's result and evaluates each operand's expression under a branch on the
coordinate along the axis, so no kernel writes the operands and no copy
kernel reads them back. Each program runs in numba's CUDA simulator against
the reference interpreter, with its kernel count asserted.
"""

from __future__ import annotations

import codegen_harness as harness

from fusec.analysis.program import Program
from fusec.analysis.remarks import collect_remarks
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from tests.test_pointwise_views import TOLERANCE, t

PIPELINE = "decompose,form-fusion-groups,group-each-op,tile-and-promote"

HALF_TOLERANCE = 1e-2
"""bf16 and f16 results: the reference rounds every intermediate, the kernel
keeps them in float32 (a few ulps of an 8-bit mantissa)."""


def check(text: str, launches: int, half: bool = False) -> Program:
    """`launches` kernels, numbers as the reference's."""
    if half:
        return harness.check_program(text, launches, PIPELINE, rtol=HALF_TOLERANCE,
                                     atol=HALF_TOLERANCE)
    return harness.check_program(text, launches, PIPELINE, tolerance=TOLERANCE)


def rope(b: int, s: int, h: int, d: int, dtype: str = "f32") -> str:
    """Rotary embedding (rotate-half) on q and k, as an LLM writes it."""
    half = d // 2
    tx, tp, tcs, t3 = (t((b, s, h, d), dtype), t((b, s, h, half), dtype),
                       t((s, half), dtype), t((s, 1, half), dtype))
    lines = [f"func.func @f(%q: {tx}, %k: {tx}, %cos: {tcs}, %sin: {tcs}) -> ({tx}, {tx}) {{",
             f"  %c3 = nn.reshape %cos : ({tcs}) -> {t3}",
             f"  %s3 = nn.reshape %sin : ({tcs}) -> {t3}"]
    for x in "qk":
        lines += [
            f"  %{x}1 = nn.slice %{x} {{starts = [0, 0, 0, 0], limits = [{b}, {s}, {h}, {half}]}}"
            f" : ({tx}) -> {tp}",
            f"  %{x}2 = nn.slice %{x} {{starts = [0, 0, 0, {half}], limits = [{b}, {s}, {h}, {d}]}}"
            f" : ({tx}) -> {tp}",
            f"  %{x}a = nn.mul %{x}1, %c3 : ({tp}, {t3}) -> {tp}",
            f"  %{x}b = nn.mul %{x}2, %s3 : ({tp}, {t3}) -> {tp}",
            f"  %{x}lo = nn.sub %{x}a, %{x}b : ({tp}, {tp}) -> {tp}",
            f"  %{x}c = nn.mul %{x}2, %c3 : ({tp}, {t3}) -> {tp}",
            f"  %{x}d = nn.mul %{x}1, %s3 : ({tp}, {t3}) -> {tp}",
            f"  %{x}hi = nn.add %{x}c, %{x}d : ({tp}, {tp}) -> {tp}",
            f"  %{x}o = nn.concat %{x}lo, %{x}hi {{axis = 3}} : ({tp}, {tp}) -> {tx}"]
    lines += [f"  func.return %qo, %ko : {tx}, {tx}", "}"]
    return "\n".join(lines) + "\n"


def two_computed(a: tuple[int, ...], b: tuple[int, ...], axis: int, tail: str = "",
                 dtype: str = "f32") -> str:
    """`concat(x * 2, y + 1)` along `axis`, then `tail` (defines `%r` from `%c`)."""
    out = list(a)
    out[axis] += b[axis]
    ta, tb, tc = t(a, dtype), t(b, dtype), t(tuple(out), dtype)
    ret = "%r" if tail else "%c"
    return (f"func.func @f(%x: {ta}, %y: {tb}) -> {tc} {{\n"
            f"  %m = nn.mul %x, %x : ({ta}, {ta}) -> {ta}\n"
            f"  %p = nn.add %y, %y : ({tb}, {tb}) -> {tb}\n"
            f"  %e = nn.exp %p : {tb}\n"
            f"  %c = nn.concat %m, %e {{axis = {axis}}} : ({ta}, {tb}) -> {tc}\n"
            + tail.replace("TC", tc) + f"  func.return {ret} : {tc}\n}}\n")


def test_rope_on_q_and_k_is_one_kernel() -> None:
    """Both rotations and both concats: one kernel over the two results."""
    program = check(rope(2, 3, 2, 8), 1)
    assert "_sel = " in program.kernels_source  # the operands are evaluated under a branch
    assert all(ln.ops.count("nn.concat") == 2 for ln in program.functions["f"].launches)


def test_rope_half_precision() -> None:
    for dtype in ("f16", "bf16"):
        check(rope(1, 3, 2, 8, dtype), 1, half=True)


def test_concat_along_a_middle_axis_then_relu() -> None:
    """`relu(concat(x * x, exp(y + y)))` along axis 1: one kernel."""
    check(two_computed((2, 3, 4), (2, 5, 4), 1, "  %r = nn.relu %c : TC\n"), 1)


def test_split_not_a_multiple_of_the_vector_width() -> None:
    """Operand widths 5 and 6 along the innermost axis: an unrolled thread's
    elements fall on both sides of the split."""
    check(two_computed((3, 5), (3, 6), 1), 1)


def test_split_along_the_outer_axis() -> None:
    check(two_computed((3, 7), (2, 7), 0), 1)


def test_concat_of_three_computed_operands() -> None:
    ta, tb, tc, to = t((2, 3)), t((2, 2)), t((2, 4)), t((2, 9))
    check(f"func.func @f(%x: {ta}, %y: {tb}, %z: {tc}) -> {to} {{\n"
          f"  %a = nn.tanh %x : {ta}\n"
          f"  %b = nn.mul %y, %y : ({tb}, {tb}) -> {tb}\n"
          f"  %c = nn.sub %z, %z : ({tc}, {tc}) -> {tc}\n"
          f"  %d = nn.add %c, %z : ({tc}, {tc}) -> {tc}\n"
          f"  %r = nn.concat %a, %b, %d {{axis = 1}} : ({ta}, {tb}, {tc}) -> {to}\n"
          f"  func.return %r : {to}\n}}\n", 1)


def test_concat_of_a_computed_value_and_an_input() -> None:
    ta, tb, to = t((4, 3)), t((4, 6)), t((4, 9))
    check(f"func.func @f(%x: {ta}, %y: {tb}) -> {to} {{\n"
          f"  %a = nn.sigmoid %x : {ta}\n"
          f"  %c = nn.concat %a, %y {{axis = 1}} : ({ta}, {tb}) -> {to}\n"
          f"  %r = nn.mul %c, %c : ({to}, {to}) -> {to}\n"
          f"  func.return %r : {to}\n}}\n", 1)


def test_operand_shared_by_both_pieces() -> None:
    """One value feeds both operands: each arm evaluates it at its own elements."""
    ta, to = t((3, 4)), t((3, 8))
    check(f"func.func @f(%x: {ta}) -> {to} {{\n"
          f"  %m = nn.mul %x, %x : ({ta}, {ta}) -> {ta}\n"
          f"  %a = nn.exp %m : {ta}\n"
          f"  %b = nn.neg %m : {ta}\n"
          f"  %c = nn.concat %a, %b {{axis = 1}} : ({ta}, {ta}) -> {to}\n"
          f"  func.return %c : {to}\n}}\n", 1)


def test_concat_half_precision() -> None:
    for dtype in ("f16", "bf16"):
        check(two_computed((2, 5), (2, 3), 1, dtype=dtype), 1, half=True)


def test_concat_of_a_reduction_result() -> None:
    """The row sums stay the reduction's result; the concat with a computed
    value is correct whatever the kernel count."""
    tx, ts, ty, to = t((4, 6)), t((4, 1)), t((4, 3)), t((4, 4))
    check(f"func.func @f(%x: {tx}, %y: {ty}) -> {to} {{\n"
          f"  %s = nn.reduce_sum %x {{axes = [1], keepdims = true}} : ({tx}) -> {ts}\n"
          f"  %a = nn.mul %y, %y : ({ty}, {ty}) -> {ty}\n"
          f"  %c = nn.concat %s, %a {{axis = 1}} : ({ts}, {ty}) -> {to}\n"
          f"  func.return %c : {to}\n}}\n", 2)


def test_computed_concat_feeds_a_reduction() -> None:
    """The reduction kernel reads a concat in place only over loaded operands:
    the pointwise kernel computes the concat, the reduction reads it."""
    tk = t((3, 1))
    tail = f"  %r = nn.reduce_sum %c {{axes = [1], keepdims = true}} : (TC) -> {tk}\n"
    text = two_computed((3, 4), (3, 5), 1, tail).replace("-> tensor<3x9xf32> {", f"-> {tk} {{")
    check(text.replace("func.return %r : tensor<3x9xf32>", f"func.return %r : {tk}"), 2)


def rope_remarks() -> list[str]:
    """The remarks form-fusion-groups records for `rope` at a tiny shape."""
    ctx = make_context()
    module = parse_module(ctx, rope(1, 4, 2, 8), "rope.mlir")
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), "decompose,form-fusion-groups")
                   ).run(module)
    return collect_remarks(module)


def test_remarks_once_and_reshapes_read_in_place() -> None:
    """Each decision is one line: the reshapes of cos and sin, read by every
    multiply of the group, were reported as refused once per reader (20
    lines), though a reshape outside a group is a view its readers take in
    place and costs no kernel."""
    remarks = rope_remarks()
    assert len(remarks) == len(set(remarks)), "\n".join(remarks)
    assert not [r for r in remarks if r.startswith("missed:")], "\n".join(remarks)
    for name in ("%c3", "%s3"):
        lines = [r for r in remarks if f"nn.reshape ({name})" in r]
        assert lines == [f"remark: nn.reshape ({name}) stays a view of its operand's buffer, "
                         "read in place by group g0 (a reshape moves no data: no kernel)"]


def test_nested_concat_also_returned() -> None:
    """A concat of a computed concat, returned beside a pointwise result."""
    ta, tb, tc, ti, to = t((2, 3)), t((2, 2)), t((2, 4)), t((2, 5)), t((2, 9))
    program = check(
        f"func.func @f(%x: {ta}, %y: {tb}, %z: {tc}) -> ({to}, {to}) {{\n"
        f"  %a = nn.exp %x : {ta}\n"
        f"  %i = nn.concat %a, %y {{axis = 1}} : ({ta}, {tb}) -> {ti}\n"
        f"  %n = nn.neg %i : {ti}\n"
        f"  %b = nn.mul %z, %z : ({tc}, {tc}) -> {tc}\n"
        f"  %c = nn.concat %n, %b {{axis = 1}} : ({ti}, {tc}) -> {to}\n"
        f"  %r = nn.tanh %c : {to}\n"
        f"  func.return %c, %r : {to}, {to}\n}}\n", 1)
    assert "out1[" in program.kernels_source


def _remarks(text: str) -> list[str]:
    ctx = make_context()
    module = parse_module(ctx, text, "t.mlir")
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), "decompose,form-fusion-groups")
                   ).run(module)
    return collect_remarks(module)


def test_transpose_in_a_computed_operand_is_refused_for_what_it_is() -> None:
    """`concat(exp(transpose(x)), y)`: the transpose was said to be "broadcast
    to" the concat's shape; it is evaluated under the select at its own
    coordinates, where a kernel cannot read a transposed value."""
    tx, tt, to = t((8, 4)), t((4, 8)), t((8, 8))
    text = (f"func.func @f(%x: {tx}, %y: {tt}) -> {to} {{\n"
            f"  %t = nn.transpose %x {{perm = [1, 0]}} : ({tx}) -> {tt}\n"
            f"  %a = nn.exp %t : {tt}\n"
            f"  %c = nn.concat %a, %y {{axis = 0}} : ({tt}, {tt}) -> {to}\n"
            f"  %r = nn.tanh %c : {to}\n"
            f"  func.return %r : {to}\n}}\n")
    missed = [r for r in _remarks(text) if r.startswith("missed:")]
    assert missed == [
        "missed: nn.concat (%c) not fused into group g0: a computed operand of nn.concat "
        "reads a transpose (perm [1, 0]) at 4x8; a kernel evaluates a concat's computed "
        "operands per element at the operand's own coordinates, under the concat's select, "
        "and reads a transposed value only at its iteration coordinates (8x8)"], missed
    check(text, 2)


def test_transpose_in_a_computed_operand_joining_a_concat_group() -> None:
    """The same refusal when the concat's group, holding another computed
    operand, meets the group of the transpose (a permutation that keeps the
    innermost axis: still not read at a piece's coordinates)."""
    tx, tp, to = t((4, 2, 8)), t((2, 4, 8)), t((2, 8, 8))
    text = (f"func.func @f(%x: {tx}, %y: {tp}, %z: {tp}) -> {to} {{\n"
            f"  %t = nn.transpose %x {{perm = [1, 0, 2]}} : ({tx}) -> {tp}\n"
            f"  %a = nn.add %t, %y : ({tp}, {tp}) -> {tp}\n"
            f"  %b = nn.exp %z : {tp}\n"
            f"  %c = nn.concat %a, %b {{axis = 1}} : ({tp}, {tp}) -> {to}\n"
            f"  %r = nn.relu %c : {to}\n"
            f"  func.return %r : {to}\n}}\n")
    missed = [r for r in _remarks(text) if r.startswith("missed:")]
    assert missed and all(
        "a computed operand of nn.concat reads a transpose (perm [1, 0, 2]) at 2x4x8; a "
        "kernel evaluates a concat's computed operands per element" in r for r in missed), missed
    assert not any("broadcast" in r for r in missed), missed
    check(text, 2)
