"""Chains of slices, reshapes and transposes are one copy kernel
(analysis/view_chains.py, codegen/layout.py): each program runs in numba's
CUDA simulator against the reference interpreter with the kernel count the
chain merge gives (each view op used to be a copy kernel of its own).
"""

from __future__ import annotations

import codegen_harness as harness

from fusec.analysis.program import Program

PIPELINE = "decompose,form-fusion-groups,group-each-op,tile-and-promote"
TOLERANCE = {"float32": 2e-5, "float16": 2e-3}


def t(shape: tuple[int, ...], dtype: str = "f32") -> str:
    """`tensor<...>` of `shape`."""
    return harness.tensor(shape, dtype)


def check(text: str, launches: int, seed: int) -> Program:
    """`launches` kernels, numbers as the reference's."""
    return harness.check_program(text, launches, PIPELINE, seed=seed, tolerance=TOLERANCE)


def head_split(b: int, s: int, heads: int, d: int, dtype: str = "f32") -> str:
    """GPT-2's head split of a biased packed QKV projection: q, k^T and v
    (each a slice, a reshape that splits the last axis and a transpose; k
    transposed once more, which moves the innermost axis)."""
    c = heads * d
    tx, tb, ts = t((b, s, 3 * c), dtype), t((3 * c,), dtype), t((b, s, c), dtype)
    tr, th, tk = t((b, s, heads, d), dtype), t((b, heads, s, d), dtype), t((b, heads, d, s),
                                                                           dtype)
    lines = [f"func.func @f(%x: {tx}, %bias: {tb}) -> ({th}, {tk}, {th}) {{",
             f"  %a = nn.add %x, %bias : ({tx}, {tb}) -> {tx}"]
    for k, name in enumerate("qkv"):
        lines += [f"  %{name}s = nn.slice %a {{starts = [0, 0, {k * c}], limits = [{b}, {s}, "
                  f"{(k + 1) * c}]}} : ({tx}) -> {ts}",
                  f"  %{name}r = nn.reshape %{name}s : ({ts}) -> {tr}",
                  f"  %{name} = nn.transpose %{name}r {{perm = [0, 2, 1, 3]}} : ({tr}) -> {th}"]
    lines += [f"  %kt = nn.transpose %k {{perm = [0, 1, 3, 2]}} : ({th}) -> {tk}",
              f"  func.return %q, %kt, %v : {th}, {tk}, {th}", "}"]
    return "\n".join(lines) + "\n"


def test_head_split_is_one_copy_per_head() -> None:
    # one copy per head, each computing the bias add at the elements its view
    # reads (was: the add's kernel, then a slice and a transpose each)
    program = check(head_split(2, 5, 2, 4), 3, seed=11)
    source = program.kernels_source
    assert source.count("(layout), 4 ops:\n#   nn.add, nn.slice, nn.reshape, nn.transpose\n") == 2
    assert "(layout), 5 ops:" in source and "cuda.shared.array" in source  # k^T: the tile


def test_head_split_half() -> None:
    check(head_split(2, 3, 2, 4, "f16"), 3, seed=12)


def test_bias_add_read_elsewhere_is_written_once() -> None:
    # %a is also read by a multiply: its kernel writes it anyway, and the
    # copies reading the same bytes back save nothing by recomputing it
    tx, tb, ts, tr, th = t((2, 3, 12)), t((12,)), t((2, 3, 4)), t((2, 3, 2, 2)), t((2, 2, 3, 2))
    program = check(f"func.func @f(%x: {tx}, %bias: {tb}) -> ({th}, {tx}) {{\n"
                    f"  %a = nn.add %x, %bias : ({tx}, {tb}) -> {tx}\n"
                    f"  %s = nn.slice %a {{starts = [0, 0, 4], limits = [2, 3, 8]}}"
                    f" : ({tx}) -> {ts}\n"
                    f"  %r = nn.reshape %s : ({ts}) -> {tr}\n"
                    f"  %h = nn.transpose %r {{perm = [0, 2, 1, 3]}} : ({tr}) -> {th}\n"
                    f"  %m = nn.mul %a, %x : ({tx}, {tx}) -> {tx}\n"
                    f"  func.return %h, %m : {th}, {tx}\n}}\n", 2, seed=15)
    assert "nn.add, nn.slice" not in program.kernels_source


def test_transpose_then_reshape_then_slice() -> None:
    tx, tt, tr, to = t((6, 8)), t((8, 6)), t((8, 2, 3)), t((8, 1, 3))
    check(f"func.func @f(%x: {tx}) -> {to} {{\n"
          f"  %t = nn.transpose %x {{perm = [1, 0]}} : ({tx}) -> {tt}\n"
          f"  %r = nn.reshape %t : ({tt}) -> {tr}\n"
          f"  %s = nn.slice %r {{starts = [0, 1, 0], limits = [8, 2, 3]}} : ({tr}) -> {to}\n"
          f"  func.return %s : {to}\n}}\n", 1, seed=13)


def test_middle_value_read_elsewhere_stays_its_own_copy() -> None:
    # %s is returned too: the chain does not merge past it (2 copies)
    tx, ts, to = t((4, 10)), t((4, 6)), t((6, 4))
    check(f"func.func @f(%x: {tx}) -> ({ts}, {to}) {{\n"
          f"  %s = nn.slice %x {{starts = [0, 2], limits = [4, 8]}} : ({tx}) -> {ts}\n"
          f"  %t = nn.transpose %s {{perm = [1, 0]}} : ({ts}) -> {to}\n"
          f"  func.return %s, %t : {ts}, {to}\n}}\n", 2, seed=14)


def test_pointwise_reads_a_whole_chain() -> None:
    # the head-split view of an input read in place by the add: one kernel
    tx, ts, tr, th = t((2, 3, 12)), t((2, 3, 4)), t((2, 3, 2, 2)), t((2, 2, 3, 2))
    check(f"func.func @f(%x: {tx}, %y: {th}) -> {th} {{\n"
          f"  %s = nn.slice %x {{starts = [0, 0, 4], limits = [2, 3, 8]}} : ({tx}) -> {ts}\n"
          f"  %r = nn.reshape %s : ({ts}) -> {tr}\n"
          f"  %h = nn.transpose %r {{perm = [0, 2, 1, 3]}} : ({tr}) -> {th}\n"
          f"  %o = nn.add %h, %y : ({th}, {th}) -> {th}\n"
          f"  func.return %o : {th}\n}}\n", 1, seed=15)


def test_recomputed_op_broadcasts_along_a_middle_axis() -> None:
    # the scale is indexed at (b, 0, c) of each element the transposed view
    # reads: coordinates unravelled from the view's index, not the output's
    tx, tw, ts, tr, th = t((2, 3, 12)), t((2, 1, 12)), t((2, 3, 4)), t((2, 3, 2, 2)), t(
        (2, 2, 3, 2))
    program = check(f"func.func @f(%x: {tx}, %w: {tw}) -> {th} {{\n"
                    f"  %a = nn.mul %x, %w : ({tx}, {tw}) -> {tx}\n"
                    f"  %s = nn.slice %a {{starts = [0, 0, 8], limits = [2, 3, 12]}}"
                    f" : ({tx}) -> {ts}\n"
                    f"  %r = nn.reshape %s : ({ts}) -> {tr}\n"
                    f"  %h = nn.transpose %r {{perm = [0, 2, 1, 3]}} : ({tr}) -> {th}\n"
                    f"  func.return %h : {th}\n}}\n", 1, seed=16)
    assert "nn.mul, nn.slice, nn.reshape, nn.transpose" in program.kernels_source


def glu(rows: int, cols: int, bias: tuple[int, ...], split_axis: int = 1) -> str:
    """A gated unit written with slices: `h = x + bias`, its two halves along
    `split_axis`, `a * silu(g)`; nothing but the slices reads `h`."""
    half = [rows, cols]
    half[split_axis] //= 2
    tx, tb, th = t((rows, cols)), t(bias), t(tuple(half))
    starts = [[0, 0], [0, 0]]
    starts[1][split_axis] = half[split_axis]
    limits = [[half[0], half[1]], [rows, cols]]
    lines = [f"func.func @f(%x: {tx}, %b: {tb}) -> {th} {{",
             f"  %h = nn.add %x, %b : ({tx}, {tb}) -> {tx}"]
    for name, lo, hi in zip("ag", starts, limits, strict=True):
        lines.append(f"  %{name} = nn.slice %h {{starts = {lo}, limits = {hi}}} : ({tx}) -> {th}")
    lines += [f"  %s = nn.silu %g : {th}", f"  %y = nn.mul %a, %s : ({th}, {th}) -> {th}",
              f"  func.return %y : {th}", "}"]
    return "\n".join(lines) + "\n"


def test_gated_unit_of_slices_is_one_kernel() -> None:
    # the bias add is evaluated where each slice reads it, in the pointwise
    # kernel of silu and mul (was: the add's kernel writing h, then that one)
    program = check(glu(6, 16, (16,)), 1, seed=21)
    assert "nn.add, nn.slice, nn.slice, nn.silu, nn.mul" in program.kernels_source


def test_gated_unit_split_along_rows_with_a_column_bias() -> None:
    # the halves are row blocks; the bias broadcasts along the rows
    check(glu(8, 12, (8, 1), split_axis=0), 1, seed=22)


def test_op_read_by_a_slice_and_directly_is_still_written() -> None:
    # %h is read whole by the second multiply: recomputing it in the slices'
    # kernel would not save writing it (2 kernels, as before)
    tx, tb, th = t((6, 16)), t((16,)), t((6, 8))
    check(f"func.func @f(%x: {tx}, %b: {tb}) -> ({th}, {tx}) {{\n"
          f"  %h = nn.add %x, %b : ({tx}, {tb}) -> {tx}\n"
          f"  %a = nn.slice %h {{starts = [0, 0], limits = [6, 8]}} : ({tx}) -> {th}\n"
          f"  %g = nn.slice %h {{starts = [0, 8], limits = [6, 16]}} : ({tx}) -> {th}\n"
          f"  %y = nn.mul %a, %g : ({th}, {th}) -> {th}\n"
          f"  %z = nn.mul %h, %x : ({tx}, {tx}) -> {tx}\n"
          f"  func.return %y, %z : {th}, {tx}\n}}\n", 2, seed=23)
