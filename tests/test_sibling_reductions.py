"""Sibling reductions (no edge between them) over one shape and the same
reduced axes share one kernel with several reduced outputs
(`passes/sibling_reductions.py`), checked in the simulator against the
reference interpreter at tiny shapes; pairs that must stay apart (other
reduced axes, a cycle through another group) say why in the report."""

from __future__ import annotations

import numpy as np

from fusec.compiler.compile import CompiledArtifacts, compile_model
from fusec.compiler.parsing import make_context, parse_module
from fusec.reference.interpreter import find_function, random_inputs, run_module
from fusec.runtime.executor import run_program


def check(text: str, launches: int, seed: int, tol: float = 1e-5) -> CompiledArtifacts:
    """Default pipeline: `launches` kernels, and the reference's numbers on
    fresh random inputs."""
    compiled = compile_model(text)
    program = compiled.program
    assert len(program.functions["f"].launches) == launches, program.kernels_source
    reference = parse_module(make_context(), text, "t.mlir")
    inputs = random_inputs(find_function(reference, "f"), seed)
    assert all(np.any(np.asarray(v) != 0) for v in inputs)
    expected = run_module(reference, inputs, "f")
    got = run_program(program, "f", inputs, device="sim")
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e.astype(g.dtype), rtol=tol, atol=tol,
                                   err_msg=program.kernels_source)
    return compiled


TWO_COLUMN_MEANS = """
func.func @f(%x: tensor<9x6xf32>, %y: tensor<9x6xf32>) -> (tensor<6xf32>, tensor<6xf32>) {
  %a = nn.reduce_mean %x {axes = [0]} : (tensor<9x6xf32>) -> tensor<6xf32>
  %b = nn.reduce_mean %y {axes = [0]} : (tensor<9x6xf32>) -> tensor<6xf32>
  func.return %a, %b : tensor<6xf32>, tensor<6xf32>
}
"""


def test_two_column_means_of_different_inputs_share_a_kernel() -> None:
    compiled = check(TWO_COLUMN_MEANS, launches=1, seed=3)
    assert "fused nn.reduce_mean (%b) into group g0: saves 0 B and 1 launch" in (
        compiled.report_md)


# The MoE router's load-balancing statistics: the column means of the
# one-hot top-1 mask and of the probabilities, two results of one row group.
ROUTER_MEANS = """
func.func @f(%l: tensor<10x4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %p = nn.softmax %l {axis = -1} : tensor<10x4xf32>
  %top = nn.reduce_max %p {axes = [1], keepdims = true} : (tensor<10x4xf32>) -> tensor<10x1xf32>
  %is = nn.cmp %p, %top {predicate = "eq"} : (tensor<10x4xf32>, tensor<10x1xf32>) -> tensor<10x4xi1>
  %one = nn.constant dense<1.0> : tensor<f32>
  %zero = nn.constant dense<0.0> : tensor<f32>
  %oh = nn.select %is, %one, %zero : (tensor<10x4xi1>, tensor<f32>, tensor<f32>) -> tensor<10x4xf32>
  %frac = nn.reduce_mean %oh {axes = [0]} : (tensor<10x4xf32>) -> tensor<4xf32>
  %pm = nn.reduce_mean %p {axes = [0]} : (tensor<10x4xf32>) -> tensor<4xf32>
  func.return %frac, %pm : tensor<4xf32>, tensor<4xf32>
}
"""


def test_column_means_of_two_results_of_one_group_share_a_kernel() -> None:
    compiled = check(ROUTER_MEANS, launches=2, seed=5)
    assert "fused nn.reduce_mean (%pm) into group g1" in compiled.report_md


def _sum_and_squares(axis: int, dtype: str = "f32") -> str:
    t = f"tensor<7x10x{dtype}>"
    k = f"tensor<{7 if axis == 1 else 10}x{dtype}>"
    return f"""
func.func @f(%x: {t}) -> ({k}, {k}) {{
  %s = nn.reduce_sum %x {{axes = [{axis}]}} : ({t}) -> {k}
  %sq = nn.mul %x, %x : ({t}, {t}) -> {t}
  %q = nn.reduce_sum %sq {{axes = [{axis}]}} : ({t}) -> {k}
  func.return %s, %q : {k}, {k}
}}
"""


def test_sum_and_sum_of_squares_over_rows_share_a_kernel() -> None:
    check(_sum_and_squares(1), launches=1, seed=7)


def test_sum_and_sum_of_squares_over_columns_share_a_kernel() -> None:
    check(_sum_and_squares(0), launches=1, seed=8)


# Layer-norm backward's parameter gradients: dgamma = sum(dy * xhat) and
# dbeta = sum(dy) over the rows, xhat normalised in the same kernel.
DGAMMA_DBETA = """
func.func @f(%x: tensor<9x6xf32>, %dy: tensor<9x6xf32>, %mean: tensor<9x1xf32>,
             %rstd: tensor<9x1xf32>) -> (tensor<6xf32>, tensor<6xf32>) {
  %xc = nn.sub %x, %mean : (tensor<9x6xf32>, tensor<9x1xf32>) -> tensor<9x6xf32>
  %xh = nn.mul %xc, %rstd : (tensor<9x6xf32>, tensor<9x1xf32>) -> tensor<9x6xf32>
  %dyxh = nn.mul %dy, %xh : (tensor<9x6xf32>, tensor<9x6xf32>) -> tensor<9x6xf32>
  %dg = nn.reduce_sum %dyxh {axes = [0]} : (tensor<9x6xf32>) -> tensor<6xf32>
  %db = nn.reduce_sum %dy {axes = [0]} : (tensor<9x6xf32>) -> tensor<6xf32>
  func.return %dg, %db : tensor<6xf32>, tensor<6xf32>
}
"""


def test_dgamma_and_dbeta_share_a_kernel() -> None:
    check(DGAMMA_DBETA, launches=1, seed=9)


OTHER_AXES = """
func.func @f(%x: tensor<9x6xf32>, %y: tensor<9x6xf32>) -> (tensor<9xf32>, tensor<6xf32>) {
  %r = nn.reduce_sum %x {axes = [1]} : (tensor<9x6xf32>) -> tensor<9xf32>
  %c = nn.reduce_sum %y {axes = [0]} : (tensor<9x6xf32>) -> tensor<6xf32>
  func.return %r, %c : tensor<9xf32>, tensor<6xf32>
}
"""


def test_other_reduced_axes_stay_apart_with_a_remark() -> None:
    compiled = check(OTHER_AXES, launches=2, seed=10)
    assert ("missed: nn.reduce_sum (%c) not fused with nn.reduce_sum (%r): the reductions "
            "cannot share one iteration space: nn.reduce_sum (%c) reduces axes [0] of 9x6 "
            "but nn.reduce_sum (%r) reduces axes [1] of 9x6") in compiled.report_md


# The second column sum reads x shifted by a matmul of the first: one kernel
# would have to run before and after the matmul.
CYCLE = """
func.func @f(%x: tensor<9x6xf32>, %w: tensor<6x6xf32>) -> (tensor<1x6xf32>, tensor<6xf32>) {
  %a = nn.reduce_sum %x {axes = [0], keepdims = true} : (tensor<9x6xf32>) -> tensor<1x6xf32>
  %m = nn.matmul %a, %w : (tensor<1x6xf32>, tensor<6x6xf32>) -> tensor<1x6xf32>
  %y = nn.sub %x, %m : (tensor<9x6xf32>, tensor<1x6xf32>) -> tensor<9x6xf32>
  %b = nn.reduce_sum %y {axes = [0]} : (tensor<9x6xf32>) -> tensor<6xf32>
  func.return %a, %b : tensor<1x6xf32>, tensor<6xf32>
}
"""


def test_a_cycle_through_another_group_stays_apart_with_a_remark() -> None:
    compiled = check(CYCLE, launches=3, seed=12, tol=1e-4)
    assert ("not fused into group g0: merging would create a cycle through nn.matmul (%m)"
            in compiled.report_md), compiled.report_md


def test_f16_column_sums_share_a_kernel() -> None:
    text = TWO_COLUMN_MEANS.replace("f32", "f16").replace("reduce_mean", "reduce_sum")
    check(text, launches=1, seed=13, tol=2e-2)


# Layer-norm backward: the row means mean(dy * gamma) and mean(dy * gamma *
# xhat) feed dx; dgamma and dbeta are column sums of the same rows.
# `dy * gamma * xhat` reads xhat from the column group's chain, but it joins
# the row group of its reader (a pointwise op joins a reduction group over
# another iteration space than its reading reductions' last), so both row
# means, the product and dx are one kernel and the column sums another.
LN_BACKWARD = """
func.func @f(%x: tensor<8x16xf32>, %dy: tensor<8x16xf32>, %gamma: tensor<16xf32>,
             %mean: tensor<8x1xf32>, %rstd: tensor<8x1xf32>)
    -> (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) {
  %xc = nn.sub %x, %mean : (tensor<8x16xf32>, tensor<8x1xf32>) -> tensor<8x16xf32>
  %xh = nn.mul %xc, %rstd : (tensor<8x16xf32>, tensor<8x1xf32>) -> tensor<8x16xf32>
  %dyxh = nn.mul %dy, %xh : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %dg = nn.reduce_sum %dyxh {axes = [0]} : (tensor<8x16xf32>) -> tensor<16xf32>
  %db = nn.reduce_sum %dy {axes = [0]} : (tensor<8x16xf32>) -> tensor<16xf32>
  %dxh = nn.mul %dy, %gamma : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %m1 = nn.reduce_mean %dxh {axes = [1], keepdims = true} : (tensor<8x16xf32>) -> tensor<8x1xf32>
  %dxhxh = nn.mul %dxh, %xh : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %m2 = nn.reduce_mean %dxhxh {axes = [1], keepdims = true} : (tensor<8x16xf32>) -> tensor<8x1xf32>
  %a = nn.sub %dxh, %m1 : (tensor<8x16xf32>, tensor<8x1xf32>) -> tensor<8x16xf32>
  %b = nn.mul %xh, %m2 : (tensor<8x16xf32>, tensor<8x1xf32>) -> tensor<8x16xf32>
  %c = nn.sub %a, %b : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %dx = nn.mul %c, %rstd : (tensor<8x16xf32>, tensor<8x1xf32>) -> tensor<8x16xf32>
  func.return %dx, %dg, %db : tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>
}
"""


def test_layer_norm_backward_row_means_share_the_dx_kernel() -> None:
    compiled = check(LN_BACKWARD, launches=2, seed=14, tol=1e-4)
    report = compiled.report_md
    assert "fused nn.mul (%dxhxh) into group g1" in report, report
    assert "fused nn.reduce_mean (%m2) into group g1" in report, report
    assert "fused nn.reduce_sum (%db) into group g0" in report, report
