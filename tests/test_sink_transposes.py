"""`sink-transposes`: a transpose of an elementwise result moves onto the
op's operands, so the pointwise group reads them transposed (one kernel)
instead of a copy transposing its result. Each program runs in numba's CUDA
simulator against the reference interpreter with the kernel count."""

from __future__ import annotations

import codegen_harness as harness

from fusec.analysis.program import Program
from tests.codegen_harness import compile_text

PIPELINE = "decompose,sink-transposes,cse,dce,form-fusion-groups,group-each-op,tile-and-promote"
WITHOUT = "decompose,cse,dce,form-fusion-groups,group-each-op,tile-and-promote"


def t(shape: tuple[int, ...]) -> str:
    return harness.tensor(shape, "f32")


def check(text: str, launches: int, seed: int) -> Program:
    return harness.check_program(text, launches, PIPELINE, seed=seed)


def add_relu_transposed(m: int, n: int) -> str:
    tx, to = t((m, n)), t((n, m))
    return (f"func.func @f(%x: {tx}, %y: {tx}) -> {to} {{\n"
            f"  %a = nn.add %x, %y : ({tx}, {tx}) -> {tx}\n"
            f"  %r = nn.relu %a : {tx}\n"
            f"  %t = nn.transpose %r {{perm = [1, 0]}} : ({tx}) -> {to}\n"
            f"  func.return %t : {to}\n}}\n")


def test_transposed_result_of_a_chain_is_one_kernel() -> None:
    text = add_relu_transposed(40, 36)
    assert len(compile_text(text, WITHOUT).functions["f"].launches) == 2  # the copy, before
    check(text, 1, seed=31)


def test_bias_and_scalar_operands_broadcast_after_the_move() -> None:
    # the bias [N] becomes [N, 1] (a reshape), the scalar stays as it is
    tx, tb, to, ts = t((24, 40)), t((40,)), t((40, 24)), "tensor<f32>"
    check(f"func.func @f(%x: {tx}, %b: {tb}) -> {to} {{\n"
          f"  %c = nn.constant dense<0.5> : {ts}\n"
          f"  %a = nn.add %x, %b : ({tx}, {tb}) -> {tx}\n"
          f"  %m = nn.mul %a, %c : ({tx}, {ts}) -> {tx}\n"
          f"  %g = nn.gelu %m {{approximate = \"tanh\"}} : {tx}\n"
          f"  %t = nn.transpose %g {{perm = [1, 0]}} : ({tx}) -> {to}\n"
          f"  func.return %t : {to}\n}}\n", 1, seed=32)


def test_a_reordering_permutation_of_a_broadcast_operand() -> None:
    # w [3, 4] aligned to [1, 3, 4] and permuted by [2, 1, 0]: its axes
    # change order, so it is reshaped, then transposed. A pointwise kernel
    # reads a transposed operand only at its iteration shape, so w's
    # transpose is a copy of its own: of w's 12 elements, where the copy
    # before transposed the whole result
    tx, tw, to = t((2, 3, 4)), t((3, 4)), t((4, 3, 2))
    program = check(f"func.func @f(%x: {tx}, %w: {tw}) -> {to} {{\n"
                    f"  %a = nn.sub %x, %w : ({tx}, {tw}) -> {tx}\n"
                    f"  %t = nn.transpose %a {{perm = [2, 1, 0]}} : ({tx}) -> {to}\n"
                    f"  func.return %t : {to}\n}}\n", 2, seed=33)
    copy, main = program.functions["f"].launches
    assert copy.ops == ["nn.reshape", "nn.transpose"] and "nn.sub" in main.ops, (copy, main)


def test_a_result_also_read_as_it_is_stays() -> None:
    # %r is returned too: it is computed once, and the transpose copies it
    tx, to = t((16, 8)), t((8, 16))
    text = (f"func.func @f(%x: {tx}) -> ({tx}, {to}) {{\n"
            f"  %r = nn.tanh %x : {tx}\n"
            f"  %t = nn.transpose %r {{perm = [1, 0]}} : ({tx}) -> {to}\n"
            f"  func.return %r, %t : {tx}, {to}\n}}\n")
    check(text, 2, seed=34)
    assert "nn.tanh" in compile_text(text, PIPELINE).kernels_source


def test_fusion_off_keeps_the_transpose_where_it_was() -> None:
    from fusec.compiler.compile_pipeline import PipelineOptions, default_pipeline
    from fusec.compiler.driver import make_registry

    spec = default_pipeline(make_registry([]), PipelineOptions(fusion=False))
    assert "sink-transposes" not in spec
    assert "sink-transposes" in default_pipeline(make_registry([]), PipelineOptions())
