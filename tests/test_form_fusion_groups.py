"""form-fusion-groups end to end: group counts on the shared models, the
grouped program equals the ungrouped one in the reference interpreter (also
on random graphs), remarks, the Graphviz view, and the order-keeping graph."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import FuncOp, ReturnOp

from fusec.analysis.dependency_graph import DependencyAnalysis, FusionGraph
from fusec.analysis.diagnostics import FusecError
from fusec.analysis.fusion_legality import FUSIBLE_KINDS
from fusec.analysis.remarks import collect_remarks, listening, module_to_dot
from fusec.bench.compile_scale import generate
from fusec.compiler.driver import make_registry, module_to_text
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.dialects import nn
from fusec.dialects.element_types import tau
from fusec.dialects.fusion import GroupOp
from fusec.passes.check_precision import relative_error
from fusec.reference.interpreter import find_function, random_inputs, run_module

SHARED_MODELS = Path("/work/shared/models")
FUSION = "decompose,form-fusion-groups"


def compile_text(text: str, pipeline: str = FUSION, name: str = "m.mlir") -> ModuleOp:
    ctx = make_context()
    module = parse_module(ctx, text, name)
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), pipeline)).run(module)
    return module


def launches(module: ModuleOp) -> list[str]:
    """One entry per kernel: groups, plus ops left alone that are not
    constants or reshapes (those cost no launch)."""
    out: list[str] = []
    for op in find_function(module).body.block.ops:
        if isinstance(op, GroupOp):
            kind = op.attributes["kind"]
            assert isinstance(kind, StringAttr)
            inner = " ".join(o.name for o in op.block.ops if o is not op.block.last_op)
            out.append(f"{kind.data}[{inner}]")
        elif not isinstance(op, (nn.ConstantOp, nn.ReshapeOp, ReturnOp)):
            out.append(op.name)
    return out


# --- the shared models -----------------------------------------------------------------

EXPECTED_LAUNCHES = {
    "chain16": 1, "softmax": 1, "add_layernorm_gelu": 1, "mlp": 2, "attention": 3,
    "inverted_residual": 3, "gpt2_block": 10,
}


@pytest.mark.parametrize("model", sorted(EXPECTED_LAUNCHES))
def test_shared_model_launch_counts(model: str) -> None:
    module = compile_text((SHARED_MODELS / f"{model}.mlir").read_text(), name=model)
    kernels = launches(module)
    listing = "\n".join(kernels)  # printed when the count is off
    assert len(kernels) <= EXPECTED_LAUNCHES[model], f"{model}: {len(kernels)}\n{listing}"
    if model in ("chain16", "softmax", "add_layernorm_gelu"):
        assert len(kernels) == 1, listing
    for op in module.walk():
        if isinstance(op, GroupOp):
            assert op.attributes["kind"].data in FUSIBLE_KINDS  # type: ignore[union-attr]


def test_gpt2_block_needs_three_times_fewer_launches_than_one_per_op() -> None:
    text = (SHARED_MODELS / "gpt2_block.mlir").read_text()
    unfused = launches(compile_text(text, "decompose"))
    fused = launches(compile_text(text))
    assert 3 * len(fused) <= len(unfused), "\n".join(fused)


def test_group_structure_of_the_models() -> None:
    text = (SHARED_MODELS / "attention.mlir").read_text()
    assert launches(compile_text(text)) == [
        "contraction[nn.transpose nn.matmul nn.mul nn.add]",
        "reduction[nn.reduce_max nn.sub nn.exp nn.reduce_sum nn.div]",
        "nn.matmul",
    ]
    text = (SHARED_MODELS / "inverted_residual.mlir").read_text()
    assert launches(compile_text(text)) == [
        "window[nn.conv2d nn.add nn.clamp]", "window[nn.conv2d nn.add nn.clamp]",
        "window[nn.conv2d nn.add nn.add]",
    ]


# --- numerics: grouped == ungrouped in the reference interpreter --------------------------

# Per model: benchmark dimension -> small dimension (whole numbers only).
SHRINK: dict[str, dict[int, int]] = {
    "chain16": {268435456: 16},
    "softmax": {16384: 4, 4096: 8},
    "add_layernorm_gelu": {16384: 4, 4096: 8},
    "mlp": {4096: 8},
    "attention": {8: 2, 12: 2, 512: 4, 64: 4},
    "inverted_residual": {32: 2, 56: 5, 192: 6},
    "gpt2_block": {8: 2, 512: 4, 768: 8, 12: 2, 64: 4, 2304: 24, 1536: 16, 3072: 32},
}
# A number not part of a name (%12), a type (f32) or a float literal (0.125).
_NUMBER = re.compile(r"(?<![\d.\-efi%])(\d+)(?![\d.])")


def small_model(name: str) -> str:
    """The shared model with its dimensions shrunk, structure unchanged."""
    table = SHRINK[name]
    text = (SHARED_MODELS / f"{name}.mlir").read_text()
    return _NUMBER.sub(lambda m: str(table.get(int(m.group(1)), m.group(1))), text)


def assert_same_results(text: str) -> None:
    plain = compile_text(text, "decompose")
    fused = compile_text(text)
    inputs = random_inputs(find_function(plain), seed=3)
    for want, got in zip(run_module(plain, inputs), run_module(fused, inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("model", sorted(SHRINK))
def test_grouped_model_equals_ungrouped(model: str) -> None:
    assert_same_results(small_model(model))


# --- precision: fused vs unfused, per dtype ------------------------------------------------
# Unfused, every value is stored in its element type between kernels; fused, a
# group keeps its intermediates in f32 registers (`round_stored` of the reference
# interpreter). The tolerance per dtype is docs/fusion.md's (tau of
# fusion_legality): norm-wise relative error at most 1e-5 for f32 (where the two
# coincide), 1e-2 for f16. Every pattern: vertical chain (chain16), reduction with
# prologue/epilogue (softmax, add_layernorm_gelu), contraction epilogues (mlp,
# attention, gpt2_block), window + elementwise (inverted_residual), siblings.


def fused_vs_unfused_error(text: str) -> float:
    """The largest relative difference between the fused and unfused programs' results."""
    plain = compile_text(text, "decompose")
    fused = compile_text(text)
    inputs = random_inputs(find_function(plain), seed=3)
    want = run_module(plain, inputs, dtype=np.float32, round_stored=True)
    got = run_module(fused, inputs, dtype=np.float32, round_stored=True)
    return max(relative_error(w, g) for w, g in zip(want, got, strict=True))


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("model", [*sorted(SHRINK), "siblings"])
def test_fused_result_within_the_dtype_tolerance_of_unfused(model: str, dtype: str) -> None:
    text = SIBLINGS if model == "siblings" else small_model(model)
    assert fused_vs_unfused_error(text.replace("f32", dtype)) <= tau(dtype)


# --- property: random graphs ----------------------------------------------------------------

FULL, ROW, COL = "tensor<4x6xf32>", "tensor<4x1xf32>", "tensor<1x6xf32>"
UNARY = ("nn.neg", "nn.tanh", "nn.relu", "nn.sigmoid", "nn.abs", "nn.exp")
BINARY = ("nn.add", "nn.mul", "nn.sub", "nn.max")


@st.composite
def random_graph(draw: st.DrawFn) -> str:
    """A function over 4x6 tensors mixing elementwise, broadcast, row and
    column reductions and layout ops, returning several values."""
    full, rows = ["%x", "%y"], ["%r0"]
    keep = "{axes = [1], keepdims = true}"
    lines = [f"  %r0 = nn.reduce_max %x {keep} : ({FULL}) -> {ROW}"]
    for i in range(draw(st.integers(2, 14))):
        v, kind = f"%v{i}", draw(st.integers(0, 7))
        a, b = draw(st.sampled_from(full)), draw(st.sampled_from(full))
        if kind == 0:
            lines.append(f"  {v} = {draw(st.sampled_from(UNARY))} {a} : {FULL}")
        elif kind == 1:
            op = draw(st.sampled_from(BINARY))
            lines.append(f"  {v} = {op} {a}, {b} : ({FULL}, {FULL}) -> {FULL}")
        elif kind == 2:
            lines.append(f"  {v} = nn.add {a}, %bias : ({FULL}, tensor<6xf32>) -> {FULL}")
        elif kind == 3:
            red = draw(st.sampled_from(("nn.reduce_sum", "nn.reduce_max", "nn.reduce_mean")))
            lines.append(f"  {v} = {red} {a} {keep} : ({FULL}) -> {ROW}")
            rows.append(v)
            continue
        elif kind == 4:
            r = draw(st.sampled_from(rows))
            lines.append(f"  {v} = nn.sub {a}, {r} : ({FULL}, {ROW}) -> {FULL}")
        elif kind == 5:
            cols = "{axes = [0], keepdims = true}"
            lines.append(f"  {v}c = nn.reduce_sum {a} {cols} : ({FULL}) -> {COL}")
            lines.append(f"  {v} = nn.mul {b}, {v}c : ({FULL}, {COL}) -> {FULL}")
        elif kind == 6:  # a reduction over another trailing space than the rows
            every = "{axes = [0, 1], keepdims = true}"
            lines.append(f"  {v}a = nn.reduce_max {a} {every} : ({FULL}) -> tensor<1x1xf32>")
            lines.append(f"  {v} = nn.sub {b}, {v}a : ({FULL}, tensor<1x1xf32>) -> {FULL}")
        else:
            perm, t = "{perm = [1, 0]}", "tensor<6x4xf32>"
            lines.append(f"  {v}t = nn.transpose {a} {perm} : ({FULL}) -> {t}")
            lines.append(f"  {v} = nn.transpose {v}t {perm} : ({t}) -> {FULL}")
        full.append(v)
    extra_full = draw(st.sampled_from(full))
    extra_row = draw(st.sampled_from(rows))
    outs = [(full[-1], FULL), (extra_full, FULL), (extra_row, ROW)]
    args = f"%x: {FULL}, %y: {FULL}, %bias: tensor<6xf32>"
    return (
        f"func.func @g({args}) -> ({FULL}, {FULL}, {ROW}) {{\n"
        + "\n".join(lines)
        + f"\n  func.return {', '.join(o for o, _ in outs)} : {', '.join(t for _, t in outs)}\n}}\n"
    )


@settings(max_examples=40, deadline=None)
@given(random_graph())
def test_random_graphs_fuse_without_changing_results(text: str) -> None:
    assert_same_results(text)
    for op in compile_text(text).walk():
        if isinstance(op, GroupOp) and op.attributes["kind"] == StringAttr("pointwise"):
            assert len({r.type for r in op.results}) == 1  # same-shaped results


# --- remarks, Graphviz, scale -------------------------------------------------------------------


def test_remarks_are_stored_streamed_and_optional() -> None:
    text = (SHARED_MODELS / "attention.mlir").read_text()
    heard: list[str] = []
    with listening(heard.append):
        module = compile_text(text)
    stored = collect_remarks(module)
    assert stored == heard
    assert any(r.startswith("remark: fused nn.transpose (%0) into group g0") for r in stored)
    assert any(r.startswith("missed: nn.matmul (%5) not fused into group g1") for r in stored)
    quiet = compile_text(text, "decompose,form-fusion-groups{remarks=false}")
    assert collect_remarks(quiet) == []
    assert "fusion.remarks" not in module_to_text(quiet)


def test_dot_shows_groups_as_clusters() -> None:
    dot = module_to_dot(compile_text((SHARED_MODELS / "mlp.mlir").read_text()))
    assert dot.startswith("digraph fusec {")
    assert 'label="g0 (contraction)"' in dot
    assert "f_arg0" not in dot
    assert 'mlp_arg0 -> mlp_0_0 [label="4096x4096xf32"];' in dot  # edges carry shapes


def test_cli_remarks_and_dot(tmp_path: Path) -> None:
    model = str(SHARED_MODELS / "softmax.mlir")
    run = subprocess.run([sys.executable, "-m", "fusec.compiler.cli", model, "-p", FUSION,
                          "--remarks"], capture_output=True, text=True, check=True)
    assert "remark: fused nn.div (%4) into group g0" in run.stderr
    out = tmp_path / "g.dot"
    subprocess.run([sys.executable, "-m", "fusec.compiler.cli", model, "--emit", "dot",
                    "-o", str(out)], check=True)
    assert 'label="g0 (reduction)"' in out.read_text()


def test_recomputed_value_keeps_results() -> None:
    t, row, all_ = "tensor<4x8x16xf32>", "tensor<4x8x1xf32>", "tensor<4x1x1xf32>"
    text = f"""func.func @f(%x: {t}) -> ({t}, {t}) {{
  %e = nn.exp %x : {t}
  %r1 = nn.reduce_sum %e {{axes = [2], keepdims = true}} : ({t}) -> {row}
  %y1 = nn.div %e, %r1 : ({t}, {row}) -> {t}
  %r2 = nn.reduce_max %e {{axes = [1, 2], keepdims = true}} : ({t}) -> {all_}
  %y2 = nn.sub %e, %r2 : ({t}, {all_}) -> {t}
  func.return %y1, %y2 : {t}, {t}
}}"""
    module = compile_text(text)
    assert [r for r in collect_remarks(module) if r.startswith("remark: recomputed")]
    assert sum(isinstance(op, nn.ExpOp) for op in module.walk()) == 2
    assert_same_results(text)


SIBLINGS = f"""func.func @s(%x: {FULL}) -> ({FULL}, {FULL}) {{
  %a = nn.exp %x : {FULL}
  %b = nn.relu %a : {FULL}
  %c = nn.neg %x : {FULL}
  func.return %b, %c : {FULL}, {FULL}
}}"""


@pytest.mark.parametrize(("policy", "expected"), [
    ("greedy", ["pointwise[nn.exp nn.relu nn.neg]"]),
    ("vertical", ["pointwise[nn.exp nn.relu]", "nn.neg"]),
    ("none", ["nn.exp", "nn.relu", "nn.neg"]),
])
def test_policies(policy: str, expected: list[str]) -> None:
    module = compile_text(SIBLINGS, f"form-fusion-groups{{policy={policy}}}")
    assert launches(module) == expected


@pytest.mark.parametrize(("option", "message"), [
    ("policy=bogus", "option 'policy': unknown policy 'bogus'"),
    ("target=v100", "option 'target': unknown target 'v100'; known targets: h200"),
    ("max_registers=-1", "option 'max-registers': max_registers must be >= 0"),
])
def test_bad_options_fail_at_pipeline_parsing(option: str, message: str) -> None:
    # The pass's own message, with the option named as the command line spells it.
    with pytest.raises(FusecError, match=f"pass 'form-fusion-groups' {message}"):
        parse_pipeline_spec(make_registry([]), f"form-fusion-groups{{{option}}}")


def test_generated_graph_compiles_and_keeps_results() -> None:
    text = generate(300, seed=1)
    module = compile_text(text)
    assert any(isinstance(op, GroupOp) for op in module.walk())
    assert_same_results(text)


def test_fusion_graph_reorders_the_window_on_merge() -> None:
    text = """func.func @f(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = nn.exp %x : tensor<4xf32>
  %b = nn.neg %x : tensor<4xf32>
  %c = nn.relu %a : tensor<4xf32>
  %d = nn.add %b, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return %c, %d : tensor<4xf32>, tensor<4xf32>
}"""
    func = next(op for op in parse_module(make_context(), text, "t").walk()
                if isinstance(op, FuncOp))
    dep = DependencyAnalysis(func)
    graph = FusionGraph(dep)
    a, _, c, d = (graph.node(op) for op in dep.ops)
    assert dep.reaches(dep.ops[0], dep.ops[2]) and not dep.reaches(dep.ops[1], dep.ops[2])
    assert graph.cycle_witness(a, d) is None
    merged = graph.merge(a, d)  # %b must now run before the merged node
    order = [n.ops[0] for n in graph.ordered_nodes()]
    assert order.index(dep.ops[1]) < order.index(merged.ops[0])
    assert graph.cycle_witness(merged, c) is None
