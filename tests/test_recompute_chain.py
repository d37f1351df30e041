"""form-fusion-groups' recomputation of chains of elementwise ops: a group
that reads a value another group computes from a chain of cheap ops
recomputes the chain from its leaves instead of reading the value back
(`passes/recompute_chain.py`). Each program runs in the CUDA simulator on
fresh random inputs against the reference interpreter; the plan's launches
and HBM bytes are compared with the same pipeline without recomputation
(`max_recompute_flops=0`)."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.program import Program
from fusec.analysis.remarks import collect_remarks
from fusec.codegen.generate import generate_program, group_attr
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.dialects.fusion import GroupOp
from fusec.reference.interpreter import find_function, random_inputs, run_module
from fusec.runtime.executor import run_program
from tests.codegen_harness import tensor

PIPELINE = "decompose,fold-constants,form-fusion-groups{{{}}},group-each-op"
NO_CHAINS = "max_recompute_flops=0"


def compile_module(text: str, options: str = "") -> ModuleOp:
    """`text` after `PIPELINE` (form-fusion-groups with `options`)."""
    ctx = make_context()
    module = parse_module(ctx, text, "t.mlir")
    spec = parse_pipeline_spec(make_registry([]), PIPELINE.format(options))
    PipelineRunner(ctx, spec).run(module)
    return module


def traffic(program: Program) -> tuple[int, int]:
    """(launches, HBM bytes) of `@f`'s plan."""
    launches = program.functions["f"].launches
    return len(launches), sum(launch.hbm_bytes for launch in launches)


def run_checked(text: str, options: str = "", tolerance: float = 1e-4) -> Program:
    """Compile, run `@f` in the simulator and compare every output with the
    reference interpreter on fresh random inputs."""
    program = generate_program(compile_module(text, options))
    reference = parse_module(make_context(), text, "t.mlir")
    seed = int(np.random.default_rng().integers(1 << 30))  # fresh inputs every run
    inputs = random_inputs(find_function(reference, "f"), seed)
    expected = run_module(reference, inputs, "f")
    got = run_program(program, "f", inputs, device="sim")
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e.astype(g.dtype), rtol=tolerance, atol=tolerance,
                                   err_msg=program.kernels_source)
    return program


def group_ops(module: ModuleOp) -> dict[str, list[str]]:
    """The op names of each group (its terminator left out), by group name."""
    return {group_attr(g, "name", ""): [o.name for o in g.block.ops][:-1]
            for g in module.walk() if isinstance(g, GroupOp)}


def recompute_remarks(module: ModuleOp) -> list[str]:
    """The accepted recomputations' remarks."""
    return [r for r in collect_remarks(module) if r.startswith("remark: recomputed")]


def layer_norm_backward(rows: int, cols: int, dtype: str = "f32") -> str:
    """dgamma, dbeta (column sums) and dx (row means) from the saved
    statistics: `xhat = (x - mean) * rstd` is read by both."""
    t, row, col = tensor((rows, cols), dtype), tensor((rows, 1), dtype), tensor((cols,), dtype)
    args = f"%x: {t}, %dy: {t}, %gamma: {col}, %mean: {row}, %rstd: {row}"
    return f"""func.func @f({args}) -> ({t}, {col}, {col}) {{
  %xc = nn.sub %x, %mean : ({t}, {row}) -> {t}
  %xh = nn.mul %xc, %rstd : ({t}, {row}) -> {t}
  %dyxh = nn.mul %dy, %xh : ({t}, {t}) -> {t}
  %dg = nn.reduce_sum %dyxh {{axes = [0]}} : ({t}) -> {col}
  %db = nn.reduce_sum %dy {{axes = [0]}} : ({t}) -> {col}
  %dxh = nn.mul %dy, %gamma : ({t}, {col}) -> {t}
  %m1 = nn.reduce_mean %dxh {{axes = [1], keepdims = true}} : ({t}) -> {row}
  %dxhxh = nn.mul %dxh, %xh : ({t}, {t}) -> {t}
  %m2 = nn.reduce_mean %dxhxh {{axes = [1], keepdims = true}} : ({t}) -> {row}
  %a = nn.sub %dxh, %m1 : ({t}, {row}) -> {t}
  %b = nn.mul %xh, %m2 : ({t}, {row}) -> {t}
  %c = nn.sub %a, %b : ({t}, {t}) -> {t}
  %dx = nn.mul %c, %rstd : ({t}, {row}) -> {t}
  func.return %dx, %dg, %db : {t}, {col}, {col}
}}"""


def test_layer_norm_backward_recomputes_xhat_at_full_size() -> None:
    # 8192 x 1024: the column sums no longer write xhat (32 MiB) for the
    # row means to read back, and their split second kernel, which only
    # wrote it, is gone.
    text = layer_norm_backward(8192, 1024)
    module = compile_module(text)
    assert recompute_remarks(module) == [
        "remark: recomputed nn.sub (%xc), nn.mul (%xh) in group g1 instead of writing it: "
        "saves 32.0 MiB (dT = 7.6 us (T_mem 7.9 - T_overlap 0.3 - T_spill 0.0))"]
    before = traffic(generate_program(compile_module(text, NO_CHAINS)))
    after = traffic(generate_program(module))
    assert after[0] < before[0] and after[1] <= before[1] - 32 * 2**20


def test_layer_norm_backward_numbers() -> None:
    text = layer_norm_backward(8, 16)
    program = run_checked(text)
    before = traffic(generate_program(compile_module(text, NO_CHAINS)))
    assert traffic(program)[0] == 2 and traffic(program)[1] < before[1]


def test_chain_of_three_read_by_reductions_over_two_axes() -> None:
    # The row group computes mean, rstd and y = (x - mean) * rstd * g for its
    # row sum; the column sums recompute the three ops from x and the two
    # per-row statistics, which the row group writes instead of y.
    t, row, col = tensor((24, 20)), tensor((24, 1)), tensor((20,))
    text = f"""func.func @f(%x: {t}, %g: {col}) -> ({row}, {col}, {col}) {{
  %mean = nn.reduce_mean %x {{axes = [1], keepdims = true}} : ({t}) -> {row}
  %xc = nn.sub %x, %mean : ({t}, {row}) -> {t}
  %sq = nn.mul %xc, %xc : ({t}, {t}) -> {t}
  %var = nn.reduce_mean %sq {{axes = [1], keepdims = true}} : ({t}) -> {row}
  %rs = nn.rsqrt %var : {row}
  %xh = nn.mul %xc, %rs : ({t}, {row}) -> {t}
  %y = nn.mul %xh, %g : ({t}, {col}) -> {t}
  %rsum = nn.reduce_sum %y {{axes = [1], keepdims = true}} : ({t}) -> {row}
  %csum = nn.reduce_sum %y {{axes = [0]}} : ({t}) -> {col}
  %xsum = nn.reduce_sum %x {{axes = [0]}} : ({t}) -> {col}
  func.return %rsum, %csum, %xsum : {row}, {col}, {col}
}}"""
    program = run_checked(text)
    module = compile_module(text)
    assert recompute_remarks(module)[0].startswith(
        "remark: recomputed nn.sub (%xc), nn.mul (%xh), nn.mul (%y) in group g1 instead")
    assert group_ops(module)["g1"][:3] == ["nn.sub", "nn.mul", "nn.mul"]
    before = traffic(generate_program(compile_module(text, NO_CHAINS)))
    # y (24 x 20) is no longer written and read; mean and rstd (24 x 1) are,
    # and the column sums read g (x they read already)
    assert traffic(program) == (2, before[1] - 2 * 24 * 20 * 4 + 2 * 2 * 24 * 4 + 20 * 4)


def test_chain_over_the_flops_bound_is_read_back() -> None:
    # tanh, exp and sigmoid cost 6 + 4 + 6 flops per element, plus the
    # subtraction: 17 > 16, so the column sum reads e back (one remark).
    t, row, col = tensor((16, 12)), tensor((16, 1)), tensor((12,))
    text = f"""func.func @f(%x: {t}, %m: {row}) -> ({row}, {col}, {col}) {{
  %c = nn.sub %x, %m : ({t}, {row}) -> {t}
  %h = nn.tanh %c : {t}
  %u = nn.exp %h : {t}
  %e = nn.sigmoid %u : {t}
  %r = nn.reduce_sum %e {{axes = [1], keepdims = true}} : ({t}) -> {row}
  %k = nn.reduce_sum %e {{axes = [0]}} : ({t}) -> {col}
  %xs = nn.reduce_sum %x {{axes = [0]}} : ({t}) -> {col}
  func.return %r, %k, %xs : {row}, {col}, {col}
}}"""
    module = compile_module(text)
    missed = [r for r in collect_remarks(module) if "not recomputed" in r]
    assert len(missed) == 1 and missed[0].endswith(
        "costs 17 flops per element, over max_recompute_flops = 16"), missed
    assert not recompute_remarks(module)
    assert traffic(run_checked(text))[0] == 2
    # allowed a larger bound, the chain is recomputed
    module = compile_module(text, "max_recompute_flops=17")
    assert any(r.startswith("remark: recomputed nn.sub (%c), nn.tanh (%h), nn.exp (%u), "
                            "nn.sigmoid (%e)") for r in collect_remarks(module))
    run_checked(text, "max_recompute_flops=17")


def test_leaf_computed_in_a_third_group_is_read_as_an_input() -> None:
    # mz is the row max of another tensor (a reduction over 16 x 8, which
    # cannot share a kernel with the 16 x 12 ones): the column sums read it
    # to recompute e = exp(x - mz).
    t, z, row, col = tensor((16, 12)), tensor((16, 8)), tensor((16, 1)), tensor((12,))
    text = f"""func.func @f(%x: {t}, %z: {z}) -> ({row}, {col}, {col}) {{
  %mz = nn.reduce_max %z {{axes = [1], keepdims = true}} : ({z}) -> {row}
  %c = nn.sub %x, %mz : ({t}, {row}) -> {t}
  %e = nn.exp %c : {t}
  %r = nn.reduce_sum %e {{axes = [1], keepdims = true}} : ({t}) -> {row}
  %k = nn.reduce_sum %e {{axes = [0]}} : ({t}) -> {col}
  %xs = nn.reduce_sum %x {{axes = [0]}} : ({t}) -> {col}
  func.return %r, %k, %xs : {row}, {col}, {col}
}}"""
    module = compile_module(text)
    assert any(r.startswith("remark: recomputed nn.sub (%c), nn.exp (%e) in group")
               for r in collect_remarks(module)), collect_remarks(module)
    groups = [g for g in module.walk() if isinstance(g, GroupOp)]
    readers = [g for g in groups if "nn.exp" in [o.name for o in g.block.ops]]
    assert len(readers) == 2  # e is computed in both groups, from mz read as an input
    mz = next(op for op in module.walk() if op.results and op.results[0].name_hint == "mz")
    assert all(mz.results[0] in g.operands or mz in g.block.ops for g in readers)
    assert traffic(run_checked(text))[0] == 3


def test_f16_layer_norm_backward() -> None:
    # f16 values: the recomputed xhat is not rounded to f16 before use (one
    # rounding fewer than the written and re-read value).
    text = layer_norm_backward(8, 16, "f16")
    module = compile_module(text)
    assert recompute_remarks(module)
    run_checked(text, tolerance=2e-2)


def test_negative_bound_is_refused() -> None:
    with pytest.raises(FusecError, match="max_recompute_flops must be >= 0"):
        compile_module(layer_norm_backward(8, 16), "max_recompute_flops=-1")


TRANSPOSED_READER = """func.func @f(%x: tensor<3x3xf32>) -> tensor<3x3xf32> {
  %max = nn.reduce_max %x {axes = [1], keepdims = true} : (tensor<3x3xf32>) -> tensor<3x1xf32>
  %shifted = nn.sub %x, %max : (tensor<3x3xf32>, tensor<3x1xf32>) -> tensor<3x3xf32>
  %exp = nn.exp %shifted : tensor<3x3xf32>
  %sum = nn.reduce_sum %exp {axes = [1], keepdims = true} : (tensor<3x3xf32>) -> tensor<3x1xf32>
  %logsum = nn.log %sum : tensor<3x1xf32>
  %t = nn.transpose %shifted {perm = [1, 0]} : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %l = nn.reshape %logsum : (tensor<3x1xf32>) -> tensor<1x3xf32>
  %y = nn.sub %t, %l : (tensor<3x3xf32>, tensor<1x3xf32>) -> tensor<3x3xf32>
  func.return %y : tensor<3x3xf32>
}"""


def test_no_chain_into_a_transpose() -> None:
    """A log_softmax read transposed (sink-transposes leaves this form): the
    reader group reads `%shifted` through a transpose, which a pointwise
    kernel applies only to operands it reads from memory, so the chain is
    not recomputed there (it was, and code generation refused the group)."""
    program = run_checked(TRANSPOSED_READER)
    assert traffic(program)[0] == 2
