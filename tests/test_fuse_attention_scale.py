"""A scale of Q (or K) by a constant before `Q Kᵀ` moves onto the scores
(`passes/fuse_attention_scale.py`): the attention is one kernel, no kernel
scales Q before it. Numbers against the reference interpreter in the
simulator on both attention engines (a multiply, a divide, the constant on
the left, K scaled, f16/bf16 with PyTorch's f32 scale and a half one, Q a
view of a packed projection), the scale kept where another op reads the
scaled Q, put back where the attention is not fused, and cuDNN's call
taking the product of both scales."""

from __future__ import annotations

from pathlib import Path

import pytest
from codegen_harness import check_program, tensor
from test_gqa import scaled_qkv_bmm_text
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import OpResult

from fusec.analysis.remarks import collect_remarks
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.dialects import nn

HEAD = "decompose,sink-transposes,unmerge-broadcasts,cse,dce,fold-constants"
TAIL = "form-fusion-groups,group-each-op"
SIMT = f"{HEAD},fuse-attention{{block_q=16 block_k=16 rows=2 cols=2}},{TAIL}"
MMA = f"{HEAD},fuse-attention{{block_q=32 block_k=16 engine=mma}},{TAIL}"
ENGINES = [SIMT, pytest.param(MMA, marks=pytest.mark.slow)]
ENGINE_IDS = ["simt", "mma"]
HALF_TOLERANCE = {"float16": 1e-2, "bfloat16": 4e-2, "float32": 4e-2}  # bf16 comes back widened
MODELS = Path(__file__).resolve().parent.parent / "bench" / "models"


def _scale(x: str, out: str, how: str, shape: tuple[int, ...], dtype: str) -> list[str]:
    """Lines computing `%{out}`, `%{x}` scaled `how`: "mul" (`x * 0.125`),
    "left" (`0.125 * x`), "div" (`x / 8.0`), or "f32" (PyTorch's `x *
    0.17677669` in a half type: widened to f32, scaled, rounded back)."""
    t, c = tensor(shape, dtype), tensor((), dtype)
    if how == "f32":
        wide, c32 = tensor(shape), tensor(())
        return [f"  %{out}_w = nn.cast %{x} : ({t}) -> {wide}",
                f"  %{out}_c = nn.constant dense<0.17677669> : {c32}",
                f"  %{out}_m = nn.mul %{out}_w, %{out}_c : ({wide}, {c32}) -> {wide}",
                f"  %{out} = nn.cast %{out}_m : ({wide}) -> {t}"]
    value, op = {"mul": ("0.125", "mul"), "left": ("0.125", "mul"), "div": ("8.0", "div")}[how]
    operands = f"%{out}_c, %{x} : ({c}, {t})" if how == "left" else f"%{x}, %{out}_c : ({t}, {c})"
    return [f"  %{out}_c = nn.constant dense<{value}> : {c}",
            f"  %{out} = nn.{op} {operands} -> {t}"]


def scaled_text(how: str, dtype: str = "f32", which: str = "q", b: int = 2, h: int = 2,
                s: int = 13, d: int = 16, returned: bool = False) -> str:
    """`@f(q, k, v)`: softmax(Q Kᵀ) V with Q (or K, `which`) scaled `how`
    (`_scale`) before the matmul, no scale of the scores; with `returned`
    the scaled Q is a result too."""
    t = lambda *shape: tensor(shape, dtype)  # noqa: E731
    q, kt, sc = t(b, h, s, d), t(b, h, d, s), t(b, h, s, s)
    results, types = ("%o, %qs", f"{q}, {q}") if returned else ("%o", q)
    lines = [f"func.func @f(%q: {q}, %k: {q}, %v: {q}) -> ({types}) {{",
             *_scale(which, f"{which}s", how, (b, h, s, d), dtype)]
    qv, kv = ("%qs", "%k") if which == "q" else ("%q", "%ks")
    lines += [f"  %kt = nn.transpose {kv} {{perm = [0, 1, 3, 2]}} : ({q}) -> {kt}",
              f"  %s = nn.matmul {qv}, %kt : ({q}, {kt}) -> {sc}",
              f"  %p = nn.softmax %s {{axis = -1}} : {sc}",
              f"  %o = nn.matmul %p, %v : ({sc}, {q}) -> {q}",
              f"  func.return {results} : {types}", "}"]
    return "\n".join(lines) + "\n"


def _module(text: str, spec: str) -> ModuleOp:
    ctx = make_context()
    module = parse_module(ctx, text, "test.mlir")
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), spec)).run(module)
    return module


@pytest.mark.parametrize("pipeline", ENGINES, ids=ENGINE_IDS)
@pytest.mark.parametrize("how", ["mul", "div", "left"])
def test_a_scaled_q_is_one_attention_kernel(pipeline: str, how: str) -> None:
    # before: two kernels, Q scaled, then the attention reading it
    program = check_program(scaled_text(how), 1, pipeline)
    assert "(attention)" in program.kernels_source


@pytest.mark.parametrize("pipeline", ENGINES, ids=ENGINE_IDS)
@pytest.mark.parametrize(("dtype", "how"), [("bf16", "f32"), ("f16", "f32"), ("bf16", "mul")])
def test_a_half_q_scaled_in_f32_or_half_is_one_kernel(pipeline: str, dtype: str,
                                                       how: str) -> None:
    # the program rounds `q * c` to the half type before the matmul; the
    # kernel scales the f32 scores instead: within the type's tolerance
    check_program(scaled_text(how, dtype), 1, pipeline, tolerance=HALF_TOLERANCE)


@pytest.mark.parametrize("pipeline", [SIMT, pytest.param(MMA, marks=pytest.mark.slow)],
                         ids=ENGINE_IDS)
def test_a_scaled_k_is_one_kernel(pipeline: str) -> None:
    # `(k / 8) .transpose(-2, -1)`: the scale before the transpose moves too
    check_program(scaled_text("div", which="k"), 1, pipeline)


@pytest.mark.parametrize("pipeline", [SIMT, pytest.param(MMA, marks=pytest.mark.slow)],
                         ids=ENGINE_IDS)
def test_q_of_a_packed_projection_scaled_and_reshaped(pipeline: str) -> None:
    # timm's Swin through torch.compile: Q sliced and squeezed out of the
    # packed QKV projection, scaled, then reshaped for the `bmm` form: read
    # in place from the projection, the scale on the scores
    check_program(scaled_qkv_bmm_text(2, 3, 16, 8), 1, pipeline)


def test_a_scaled_q_read_elsewhere_keeps_its_kernel() -> None:
    # the scaled Q is also a result: its kernel writes it anyway, and the
    # attention reads it (two kernels, as before), with a remark saying why
    text = scaled_text("mul", returned=True)
    check_program(text, 2, SIMT)
    remarks = collect_remarks(_module(text, SIMT))
    assert any(r.startswith("remark: fused attention") for r in remarks), remarks
    assert ("missed: Q's scale nn.mul (%qs) stays outside the attention "
            "at nn.matmul (%o): nn.mul (%qs) is also read by func.return") in remarks


def test_the_remark_names_the_scale() -> None:
    remarks = collect_remarks(_module(scaled_text("div"), SIMT))
    assert ("remark: Q's scale nn.div (%qs) moved onto the scores of the attention at "
            "nn.matmul (%o): no kernel of its own") in remarks


def test_an_attention_left_unfused_keeps_the_scale_on_q(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    # f16 with library GEMMs: the three kernels are estimated faster, so the
    # scale goes back on Q (the GEMM rounds the scores to f16, where Q Kᵀ
    # unscaled could overflow) and no attention group is formed
    import fusec.scheduling.gemm_choice as gemm_choice

    monkeypatch.setattr(gemm_choice, "library_available", lambda: True)
    text = (MODELS / "attention.mlir").read_text().replace("f32>", "f16>")
    text = text.replace("%1 = nn.matmul %q, %0", "%1 = nn.matmul %qs, %0").replace(
        "  %1 = nn.matmul", "  %qc = nn.constant dense<0.5> : tensor<f16>\n"
        "  %qs = nn.mul %q, %qc : (tensor<8x12x512x64xf16>, tensor<f16>) -> "
        "tensor<8x12x512x64xf16>\n  %1 = nn.matmul", 1)
    module = _module(text, 'decompose,fold-constants,fuse-attention{target="h200"}')
    assert not any(op.name == "fusion.group" for op in module.walk())
    qk = next(op for op in module.walk() if isinstance(op, nn.MatmulOp))
    assert isinstance(qk.lhs, OpResult) and isinstance(scale := qk.lhs.op, nn.MulOp)
    assert scale.lhs.name_hint == "q"
    (use,) = qk.result.uses
    assert isinstance(use.operation, nn.MulOp)  # the program's own scale of the scores
