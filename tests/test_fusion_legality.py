"""The four legality predicates, each alone: verdicts and readable reasons."""

from __future__ import annotations

import dataclasses

import pytest
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation

from fusec.analysis.dependency_graph import DependencyAnalysis, FusionGraph
from fusec.analysis.fusion_legality import (
    Candidate,
    FusionOptions,
    can_fuse,
    dep_ok,
    gain_ok,
    prec_ok,
    res_ok,
    single_op_info,
)
from fusec.analysis.targets import Target, get_target
from fusec.compiler.compile import compile_model
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.element_types import element
from tests.codegen_harness import check_program

T = "tensor<64x32xf32>"


def make_candidate(body: str, a: str, b: str, args: str = f"%x: {T}",
                   target: Target | None = None, **options: object) -> Candidate:
    """A candidate between the single-op groups of values `%a` and `%b`."""
    text = f"func.func @f({args}) {{\n{body}\n  func.return\n}}"
    return candidate_from_text(text, a, b, target, **options)


def candidate_from_text(text: str, a: str, b: str, target: Target | None = None,
                        **options: object) -> Candidate:
    """A candidate between the single-op groups of values `%a` and `%b` of
    the one function in `text`."""
    module = parse_module(make_context(), text, "t.mlir")
    func = next(op for op in module.walk() if isinstance(op, FuncOp))
    dep = DependencyAnalysis(func)
    graph = FusionGraph(dep)
    by_name: dict[str, Operation] = {op.results[0].name_hint or "": op for op in dep.ops}
    infos = {nid: single_op_info(n.ops[0], nid, dep) for nid, n in graph.nodes.items()}
    opts = FusionOptions(max_registers=255, **options)  # type: ignore[arg-type]
    return Candidate(infos[graph.node_of[by_name[a]]], infos[graph.node_of[by_name[b]]],
                     dep, graph, target or get_target("h200"), opts)


CHAIN = f"""
  %e = nn.exp %x : {T}
  %r = nn.relu %e : {T}
  func.return %r : {T}"""


def test_a_chain_is_legal_under_all_four() -> None:
    c = make_candidate(CHAIN.replace(f"  func.return %r : {T}", f"  %z = nn.neg %r : {T}"),
                       "e", "r")
    for predicate in (dep_ok, prec_ok, res_ok, gain_ok):
        assert predicate(c).ok, predicate(c).reason
    verdict = can_fuse(c)
    assert verdict.ok and verdict.gain is not None and verdict.gain.saved_launches == 1


def test_predicates_have_no_side_effects() -> None:
    c = make_candidate(f"  %e = nn.exp %x : {T}\n  %r = nn.relu %e : {T}", "e", "r")
    before = (len(c.graph.nodes), list(c.graph.order))
    for predicate in (dep_ok, prec_ok, res_ok, gain_ok, can_fuse):
        predicate(c)
    assert (len(c.graph.nodes), list(c.graph.order)) == before


def test_dep_refuses_a_never_contract() -> None:
    c = make_candidate(f'  %e = nn.exp %x {{fusion = "never"}} : {T}\n  %r = nn.relu %e : {T}',
                       "e", "r")
    assert dep_ok(c).reason == 'nn.exp (%e) has fusion = "never"'


def test_dep_refuses_a_cycle_through_an_outside_op() -> None:
    body = f"""
  %e = nn.exp %x : {T}
  %s = nn.reduce_sum %e {{axes = [0], keepdims = true}} : ({T}) -> tensor<1x32xf32>
  %y = nn.add %e, %s : ({T}, tensor<1x32xf32>) -> {T}"""
    verdict = dep_ok(make_candidate(body, "e", "y"))
    assert not verdict.ok
    assert verdict.reason == ("merging would create a cycle through nn.reduce_sum (%s), which "
                              "reads one group and feeds the other")


def test_dep_refuses_reductions_over_different_spaces() -> None:
    t = "tensor<4x8x16xf32>"
    body = f"""
  %a = nn.reduce_sum %x {{axes = [2], keepdims = true}} : ({t}) -> tensor<4x8x1xf32>
  %b = nn.reduce_max %x {{axes = [1, 2], keepdims = true}} : ({t}) -> tensor<4x1x1xf32>"""
    c = make_candidate(body, "a", "b", args="%x: tensor<4x8x16xf32>")
    assert "cannot share one iteration space" in dep_ok(c).reason
    assert "reduces axes [2] of 4x8x16" in dep_ok(c).reason


def test_dep_accepts_reductions_over_the_same_rows() -> None:
    body = f"""
  %a = nn.reduce_sum %x {{axes = [1], keepdims = true}} : ({T}) -> tensor<64x1xf32>
  %b = nn.reduce_max %x {{axes = [1], keepdims = true}} : ({T}) -> tensor<64x1xf32>"""
    c = make_candidate(body, "a", "b")
    assert dep_ok(c).ok
    assert not isinstance(c.fused, str) and c.fused.kind == "reduction"


def test_dep_refuses_an_elementwise_prologue_of_a_matmul() -> None:
    body = f"""
  %r = nn.relu %x : {T}
  %m = nn.matmul %r, %w : ({T}, tensor<32x16xf32>) -> tensor<64x16xf32>"""
    c = make_candidate(body, "r", "m", args=f"%x: {T}, %w: tensor<32x16xf32>")
    assert "would be a prologue of a contraction group" in dep_ok(c).reason


def test_dep_accepts_a_matmul_epilogue_and_folds_a_transpose() -> None:
    body = """
  %t = nn.transpose %k {perm = [1, 0]} : (tensor<32x64xf32>) -> tensor<64x32xf32>
  %m = nn.matmul %x, %t : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<16x32xf32>
  %r = nn.relu %m : tensor<16x32xf32>"""
    args = "%x: tensor<16x64xf32>, %k: tensor<32x64xf32>"
    assert dep_ok(make_candidate(body, "m", "r", args=args)).ok
    assert dep_ok(make_candidate(body, "t", "m", args=args)).ok
    off = make_candidate(body, "t", "m", args=args, fold_views=False)
    assert "layout ops fold only into the operand loads" in dep_ok(off).reason


def test_dep_refuses_results_of_another_shape() -> None:
    body = f"""
  %b2 = nn.mul %b, %b : (tensor<32xf32>, tensor<32xf32>) -> tensor<32xf32>
  %y = nn.add %x, %b2 : ({T}, tensor<32xf32>) -> {T}
  %q = nn.neg %b2 : tensor<32xf32>"""
    c = make_candidate(body, "b2", "y", args=f"%x: {T}, %b: tensor<32xf32>")
    assert dep_ok(c).reason == (
        "nn.mul (%b2) is also read by nn.neg (%q) outside the group, and a pointwise "
        "group's results must have shape 64x32, not 32")


def test_prec_refuses_a_narrowing_cast_into_an_accumulation() -> None:
    body = f"""
  %h = nn.cast %x : ({T}) -> tensor<64x32xf16>
  %s = nn.reduce_sum %h {{axes = [1], keepdims = true}} : (tensor<64x32xf16>) -> tensor<64x1xf16>"""
    verdict = prec_ok(make_candidate(body, "h", "s"))
    assert not verdict.ok and "rounds to f16 and feeds the accumulation" in verdict.reason
    assert prec_ok(make_candidate(body, "h", "s", allow_reduced_precision=True)).ok


def test_prec_refuses_drift_over_tau() -> None:
    body = """
  %a = nn.exp %x : tensor<64xf16>
  %b = nn.exp %a : tensor<64xf16>
  %c = nn.neg %b : tensor<64xf16>"""
    c = make_candidate(body, "a", "b", args="%x: tensor<64xf16>")
    assert prec_ok(c).ok  # one skipped f16 rounding: 4.9e-4 < tau(f16) = 1e-2
    worse = dataclasses.replace(c, a=dataclasses.replace(c.a, drift=0.02))
    assert "more than tau = 0.01 for f16" in prec_ok(worse).reason


def test_res_refuses_over_the_register_limit() -> None:
    c = make_candidate(f"  %e = nn.exp %x : {T}\n  %r = nn.relu %e : {T}", "e", "r")
    assert res_ok(c).ok
    tight = dataclasses.replace(c, options=FusionOptions(max_registers=8))
    assert res_ok(tight).reason == ("the fused kernel needs about 13 registers per thread, "
                                    "over the limit of 8 on h200")


def test_res_refuses_over_the_shared_memory_limit() -> None:
    body = f"""
  %a = nn.reduce_sum %x {{axes = [1], keepdims = true}} : ({T}) -> tensor<64x1xf32>
  %b = nn.reduce_max %x {{axes = [1], keepdims = true}} : ({T}) -> tensor<64x1xf32>"""
    tiny = dataclasses.replace(get_target("h200"), shared_memory_per_block=200)
    reason = res_ok(make_candidate(body, "a", "b", target=tiny)).reason
    assert reason == ("the fused kernel needs 256 bytes of shared memory per block, "
                      "over 200 on h200")


def test_res_reads_the_static_limit_not_the_dynamic_one() -> None:
    # the kernels formed here declare static shared arrays: 48 KiB on every
    # GPU, whatever dynamic shared memory the target allows per block
    body = f"""
  %a = nn.reduce_sum %x {{axes = [1], keepdims = true}} : ({T}) -> tensor<64x1xf32>
  %b = nn.reduce_max %x {{axes = [1], keepdims = true}} : ({T}) -> tensor<64x1xf32>"""
    tiny = dataclasses.replace(get_target("h200"), static_shared_memory_per_block=200)
    assert get_target("h200").shared_memory_per_block == 232448
    reason = res_ok(make_candidate(body, "a", "b", target=tiny)).reason
    assert reason == ("the fused kernel needs 256 bytes of shared memory per block, "
                      "over 200 on h200")


def test_gain_refuses_recomputing_a_transcendental_per_element() -> None:
    body = """
  %g = nn.gelu %b : tensor<4096xf32>
  %y = nn.add %x, %g : (tensor<65536x4096xf32>, tensor<4096xf32>) -> tensor<65536x4096xf32>"""
    verdict = gain_ok(make_candidate(body, "g", "y",
                                     args="%x: tensor<65536x4096xf32>, %b: tensor<4096xf32>"))
    assert not verdict.ok and verdict.gain is not None and verdict.gain.delta < 0
    assert verdict.reason.startswith("the cost model predicts no gain: dT = -")


def test_can_fuse_reports_the_first_refusal() -> None:
    body = f"""
  %h = nn.cast %x : ({T}) -> tensor<64x32xf16>
  %s = nn.reduce_sum %h {{axes = [1], keepdims = true}} : (tensor<64x32xf16>) -> tensor<64x1xf16>"""
    c = dataclasses.replace(make_candidate(body, "h", "s"),
                            options=FusionOptions(max_registers=10))
    assert "rounds to f16" in can_fuse(c).reason  # prec before res


@pytest.mark.parametrize("target", ["h200", "h100", "a100", "rtx4090", "orin"])
def test_every_target_fuses_a_chain(target: str) -> None:
    c = make_candidate(f"  %e = nn.exp %x : {T}\n  %r = nn.relu %e : {T}", "e", "r",
                       target=get_target(target))
    assert can_fuse(c).ok


def test_prec_holds_boolean_outputs_to_exact_results() -> None:
    # The skipped f16 rounding of %a may flip the comparison: no tolerance.
    text = """func.func @f(%x: tensor<64xf16>) -> tensor<64xi1> {
  %a = nn.add %x, %x : (tensor<64xf16>, tensor<64xf16>) -> tensor<64xf16>
  %c = nn.cmp %a, %x {predicate = "lt"} : (tensor<64xf16>, tensor<64xf16>) -> tensor<64xi1>
  func.return %c : tensor<64xi1>
}"""
    verdict = prec_ok(candidate_from_text(text, "a", "c"))
    assert not verdict.ok
    assert verdict.reason.endswith(
        "more than tau = 0 for i1 (booleans and integers must match exactly)")


# Issue 10 item 5: f32 -> f16 -> f32 casts, a cmp and a select, with f32 and
# i1 outputs, crashed prec_ok (no tau for i1).
MIXED_OUTPUTS = """
func.func @f(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xi1>) {
  %h = nn.cast %x : (tensor<8xf32>) -> tensor<8xf16>
  %h2 = nn.add %h, %h : (tensor<8xf16>, tensor<8xf16>) -> tensor<8xf16>
  %b = nn.cast %h2 : (tensor<8xf16>) -> tensor<8xf32>
  %c = nn.cmp %b, %y {predicate = "lt"} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xi1>
  %s = nn.select %c, %b, %y : (tensor<8xi1>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  func.return %s, %c : tensor<8xf32>, tensor<8xi1>
}"""


def test_an_i1_output_beside_f16_intermediates_compiles_and_runs() -> None:
    artifacts = compile_model(MIXED_OUTPUTS)
    assert "more than tau = 0 for i1" in artifacts.report_md
    check_program(MIXED_OUTPUTS, launches=len(artifacts.program.functions["f"].launches),
                  pipeline="form-fusion-groups,group-each-op")


def test_prec_estimates_skipped_roundings_as_independent_errors() -> None:
    # A bf16 chain of 16 `x * 1.001 + 0.001` steps (chain16 in bf16): 31
    # skipped roundings. Summed linearly (31 x 2^-8 = 0.12) they passed
    # tau = 0.05 and split the chain into three kernels; as independent errors
    # they come to sqrt(31) x 2^-8 = 0.022.
    t = "tensor<256xbf16>"
    steps = "\n".join(
        f"  %m{i} = nn.mul %a{i}, %s : ({t}, tensor<bf16>) -> {t}\n"
        f"  %a{i + 1} = nn.add %m{i}, %b : ({t}, tensor<bf16>) -> {t}"
        for i in range(16))
    text = (f"func.func @f(%a0: {t}) -> {t} {{\n"
            "  %s = nn.constant dense<1.001> : tensor<bf16>\n"
            "  %b = nn.constant dense<0.001> : tensor<bf16>\n"
            f"{steps}\n  func.return %a16 : {t}\n}}")
    artifacts = compile_model(text)
    assert len(artifacts.program.functions["f"].launches) == 1
    assert "more than tau" not in artifacts.report_md
    tol = element("bf16").tolerance  # bf16 comes back widened to f32
    check_program(text, launches=1, pipeline="form-fusion-groups,group-each-op",
                  tolerance={"float32": tol, "bfloat16": tol})
