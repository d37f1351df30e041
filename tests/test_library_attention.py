"""cuDNN's fused attention as an attention group's backend
(`scheduling/attention_library.py`, `codegen/library_attention.py`): which
attentions it takes, where their tensors lie (a packed QKV projection read
in place, the output written straight into `[batch, tokens, heads * dim]`),
the choice and its remarks, the plan's checks, and every attention staying
fusec's where cuDNN's attention is not installed. The GPU runs are in
tests/test_gpu_library_attention.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from codegen_harness import compile_text, tensor
from test_gqa import (
    bmm_attention_text,
    fused_qkv_attention_text,
    gqa_bmm_text,
    gqa_text,
    shifted_window_text,
)

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.program import Program
from fusec.analysis.remarks import collect_remarks
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec

PASSES = "decompose,sink-transposes,unmerge-broadcasts,cse,dce,fold-constants"
TAIL = "form-fusion-groups,group-each-op"


def pipeline(backend: str = "auto") -> str:
    return f'{PASSES},fuse-attention{{target="h100" backend="{backend}"}},{TAIL}'


def vit_attention_text(b: int, h: int, s: int, d: int, dtype: str = "bf16") -> str:
    """A ViT block's attention: a packed `[B, S, 3*H*D]` projection, the
    output moved back to `[B, S, H*D]` for the next projection."""
    text = fused_qkv_attention_text(b, h, s, d, dtype)
    q, merged = tensor((b, h, s, d), dtype), tensor((b, s, h * d), dtype)
    moved = tensor((b, s, h, d), dtype)
    return text.replace(f"-> {q} {{", f"-> {merged} {{", 1).replace(
        f"  func.return %o : {q}",
        f"  %ot = nn.transpose %o {{perm = [0, 2, 1, 3]}} : ({q}) -> {moved}\n"
        f"  %om = nn.reshape %ot : ({moved}) -> {merged}\n"
        f"  func.return %om : {merged}")


def masked_text(b: int, h: int, s: int, d: int, dtype: str = "bf16",
                predicate: str = "le") -> str:
    """`vit_attention_text` with a mask built from index ranges: key j kept
    for query i where `j <predicate> i` ("le": causal)."""
    text = vit_attention_text(b, h, s, d, dtype)
    sc, t = tensor((b, h, s, s), dtype), tensor((), dtype)
    rows = ", ".join(f"[{i}]" for i in range(s))
    cols = ", ".join(str(j) for j in range(s))
    mask = (f"  %i = nn.constant dense<[{rows}]> : tensor<{s}x1xi64>\n"
            f"  %j = nn.constant dense<[[{cols}]]> : tensor<1x{s}xi64>\n"
            f"  %keep = nn.cmp %j, %i {{predicate = \"{predicate}\"}} : "
            f"(tensor<1x{s}xi64>, tensor<{s}x1xi64>) -> tensor<{s}x{s}xi1>\n"
            f"  %fill = nn.constant dense<-3.0e+04> : {t}\n"
            f"  %xm = nn.select %keep, %x, %fill : (tensor<{s}x{s}xi1>, {sc}, {t}) -> {sc}\n")
    return text.replace("  %pr = nn.softmax %x ", mask + "  %pr = nn.softmax %xm ")


def padded_text(b: int, h: int, s: int, d: int, dtype: str = "bf16",
                mask: tuple[int, ...] | None = None) -> str:
    """`vit_attention_text` with a padding mask: a program input of shape
    `mask` (default `[B, 1, 1, S]`, one value per batch entry and key, as
    BERT's extended attention mask) added to the scaled scores."""
    mask = mask or (b, 1, 1, s)
    text = vit_attention_text(b, h, s, d, dtype)
    sc, m = tensor((b, h, s, s), dtype), tensor(mask, dtype)
    text = text.replace("func.func @f(%qkv: ", f"func.func @f(%mask: {m}, %qkv: ", 1)
    return text.replace("  %pr = nn.softmax %x ",
                        f"  %xm = nn.add %x, %mask : ({sc}, {m}) -> {sc}\n"
                        "  %pr = nn.softmax %xm ")


NEG_INF = {"f16": "0xFC00", "bf16": "0xFF80", "f32": "0xFF800000"}


def bool_mask_text(b: int, h: int, s: int, d: int, dtype: str = "bf16",
                   fill: str | None = None) -> str:
    """`vit_attention_text` with a boolean padding mask of the program's, as
    Hugging Face models write it through torch.compile: the scores where the
    `[B, 1, 1, S]` mask is false are `fill` (default -inf)."""
    text = vit_attention_text(b, h, s, d, dtype)
    sc, m, t = tensor((b, h, s, s), dtype), tensor((b, 1, 1, s), "i1"), tensor((), dtype)
    text = text.replace("func.func @f(%qkv: ", f"func.func @f(%mask: {m}, %qkv: ", 1)
    return text.replace("  %pr = nn.softmax %x ",
                        f"  %fill = nn.constant dense<{fill or NEG_INF[dtype]}> : {t}\n"
                        f"  %xm = nn.select %mask, %x, %fill : ({m}, {sc}, {t}) -> {sc}\n"
                        "  %pr = nn.softmax %xm ")


def scaled_after_the_mask(b: int, h: int, s: int, d: int) -> str:
    """`padded_text` with the mask added before the scores are scaled."""
    lines = padded_text(b, h, s, d).splitlines()
    add = next(i for i, line in enumerate(lines) if "%xm = nn.add" in line)
    mul = next(i for i, line in enumerate(lines) if "%x = nn.mul %s, %c" in line)
    added = lines.pop(add).replace("%xm = nn.add %x,", "%sm = nn.add %s,")
    lines[mul] = lines[mul].replace("nn.mul %s, %c", "nn.mul %sm, %c")
    lines.insert(mul, added)
    return "\n".join(lines).replace("nn.softmax %xm", "nn.softmax %x") + "\n"


@pytest.fixture
def cudnn_attention(monkeypatch: pytest.MonkeyPatch) -> None:
    """cuDNN's attention installed, as far as the compiler can tell."""
    import fusec.passes.fuse_attention as fuse_attention

    monkeypatch.setattr(fuse_attention, "sdpa_available", lambda: True)


def _sdpa(program: Program) -> list[dict[str, object]]:
    return [dict(la.library) for f in program.functions.values() for la in f.launches
            if la.library is not None and str(la.library["library"]).startswith("cudnn_sdpa")]


@pytest.mark.usefixtures("cudnn_attention")
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_packed_projection_read_in_place_and_output_written_merged(dtype: str) -> None:
    b, h, s, d = 2, 3, 20, 8
    program = compile_text(vit_attention_text(b, h, s, d, dtype), pipeline("library"))
    (spec,) = _sdpa(program)
    assert len(program.functions["f"].launches) == 1  # no copy kernel before or after
    assert spec["library"] == f"cudnn_sdpa_{dtype}" and spec["scale"] == 0.5
    row = 3 * h * d  # one token of the packed projection
    for k, which in enumerate("qkv"):
        assert spec[which] == {"value": spec["q"]["value"], "offset": k * h * d,  # type: ignore
                               "dims": [b, h, s, d], "strides": [s * row, d, row, 1]}
    assert spec["o"]["dims"] == [b, h, s, d]  # type: ignore[index]
    assert spec["o"]["strides"] == [s * h * d, d, h * d, 1]  # type: ignore[index]


@pytest.mark.usefixtures("cudnn_attention")
def test_plain_operands_and_merged_batch_axes() -> None:
    # bmm form: [B*H, S, D] merged and split again; K read transposed
    (spec,) = _sdpa(compile_text(bmm_attention_text(2, 3, 16, 8, "f16"), pipeline("library")))
    assert spec["q"]["strides"] == [3 * 16 * 8, 16 * 8, 8, 1]  # type: ignore[index]
    assert spec["k"]["dims"] == [2, 3, 16, 8]  # type: ignore[index]


@pytest.mark.usefixtures("cudnn_attention")
def test_auto_takes_cudnn_where_estimated_faster() -> None:
    # ViT-B/16's attention: cuDNN ~15 us against ~66 us for fusec's kernel (h100)
    assert len(_sdpa(compile_text(vit_attention_text(16, 12, 197, 64), pipeline()))) == 1
    assert not _sdpa(compile_text(vit_attention_text(16, 12, 197, 64), pipeline("fused")))


@pytest.mark.usefixtures("cudnn_attention")
@pytest.mark.parametrize("text", [
    vit_attention_text(2, 3, 16, 8, "f32"),  # cuDNN's attention takes f16 and bf16
    vit_attention_text(2, 3, 16, 12, "bf16"),  # head dim not a multiple of 8
], ids=["f32", "head-dim-12"])
def test_attentions_cudnn_does_not_take_stay_fused(text: str) -> None:
    program = compile_text(text, pipeline("library"))
    assert not _sdpa(program) and len(program.functions["f"].launches) == 1


@pytest.mark.usefixtures("cudnn_attention")
@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_grouped_query_attention_reads_each_kv_head_in_place(causal: bool) -> None:
    # 6 query heads over 2 K/V heads: cuDNN reads K/V head h // 3 for query
    # head h, so K and V keep their 2 heads and no kernel repeats them
    b, hkv, g, s, d = 2, 2, 3, 16, 8
    program = compile_text(gqa_text(b, hkv, g, s, d, "bf16", causal=causal), pipeline("library"))
    (spec,) = _sdpa(program)
    assert len(program.functions["f"].launches) == 1 and spec["causal"] is causal
    assert spec["q"]["dims"] == spec["o"]["dims"] == [b, hkv * g, s, d]  # type: ignore[index]
    for which in ("k", "v"):
        assert spec[which]["dims"] == [b, hkv, s, d]  # type: ignore[index]
        assert spec[which]["strides"] == [hkv * s * d, s * d, d, 1]  # type: ignore[index]


@pytest.mark.usefixtures("cudnn_attention")
def test_multi_query_attention_and_the_bmm_form_take_cudnn() -> None:
    # one K/V head for all (its heads axis of one dropped), and Llama's
    # repeat_kv behind the bmm form that torch.compile writes
    (mqa,) = _sdpa(compile_text(gqa_text(2, 1, 4, 16, 8, "f16", heads_last=True),
                                pipeline("library")))
    assert mqa["k"]["dims"][1] * 4 == mqa["q"]["dims"][1]  # type: ignore[index]
    bmm = gqa_bmm_text(2, 2, 2, 16, 8).replace("f32", "bf16")
    (spec,) = _sdpa(compile_text(bmm, pipeline("library")))
    assert spec["q"]["dims"] == [2, 4, 16, 8] and spec["k"]["dims"] == [2, 2, 16, 8]  # type: ignore[index]


@pytest.mark.usefixtures("cudnn_attention")
@pytest.mark.parametrize(("mask", "strides"), [
    ((2, 1, 1, 16), [16, 0, 0, 1]),  # BERT's padding mask: per batch entry and key
    ((2, 1, 16, 16), [256, 0, 16, 1]),  # per query and key
    ((16,), [0, 0, 0, 1]),  # one for every batch entry
], ids=["padding", "per-query", "keys-only"])
def test_a_mask_tensor_is_cudnns_bias(mask: tuple[int, ...], strides: list[int]) -> None:
    # the mask is read in place, broadcast by strides of 0; no kernel adds it
    b, h, s, d = 2, 3, 16, 8
    program = compile_text(padded_text(b, h, s, d, mask=mask), pipeline("library"))
    (spec,) = _sdpa(program)
    assert len(program.functions["f"].launches) == 1
    assert spec["bias"]["dims"] == [b, h, s, s]  # type: ignore[index]
    assert spec["bias"]["strides"] == strides  # type: ignore[index]
    assert spec["causal"] is False and spec["scale"] == 0.5


@pytest.mark.usefixtures("cudnn_attention")
@pytest.mark.parametrize("text", [
    padded_text(2, 3, 16, 8, "bf16", (2, 1, 16, 1)),  # one value per query: not per key
    scaled_after_the_mask(2, 3, 16, 8),  # not cuDNN's order: scale * QKᵀ + bias
], ids=["per-query-only", "scaled-after"])
def test_masks_cudnn_cannot_add_stay_fusecs(text: str) -> None:
    assert not _sdpa(compile_text(text, pipeline("library")))


@pytest.mark.usefixtures("cudnn_attention")
def test_a_shifted_windows_bias_and_mask_stay_fusecs() -> None:
    """Swin's shifted windows add a position bias and a mask per window to
    the scores; cuDNN adds one bias, so fusec's kernel takes the attention
    (one launch: Q's scale moved onto its scores) and the remark says why."""
    text = shifted_window_text(2, 4, 2, 16, 8, "bf16")
    program = compile_text(text, pipeline("library"))
    assert not _sdpa(program) and len(program.functions["f"].launches) == 1
    ctx = make_context()
    module = parse_module(ctx, text, "t.mlir")
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), pipeline("library"))).run(module)
    assert any("masked twice (cuDNN adds one mask)" in r for r in collect_remarks(module))


def scaled_q_text(b: int, h: int, s: int, d: int, dtype: str = "bf16") -> str:
    """`vit_attention_text` with Q scaled before `Q Kᵀ` as PyTorch writes
    `q * 0.17677669` in a half type: widened to f32, scaled, rounded back."""
    q, wide = tensor((b, h, s, d), dtype), tensor((b, h, s, d))
    return vit_attention_text(b, h, s, d, dtype).replace(
        "  %s = nn.matmul %q4,",
        f"  %qw = nn.cast %q4 : ({q}) -> {wide}\n"
        "  %qc = nn.constant dense<0.17677669> : tensor<f32>\n"
        f"  %qm = nn.mul %qw, %qc : ({wide}, tensor<f32>) -> {wide}\n"
        f"  %qs = nn.cast %qm : ({wide}) -> {q}\n"
        "  %s = nn.matmul %qs,")


@pytest.mark.usefixtures("cudnn_attention")
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_a_scale_of_q_joins_cudnns_scale(dtype: str) -> None:
    # Q's f32 scale moves onto the scores (`passes/fuse_attention_scale.py`):
    # cuDNN scales them by both factors and reads Q in place from the
    # packed projection; no kernel scales Q
    b, h, s, d = 2, 3, 16, 8
    program = compile_text(scaled_q_text(b, h, s, d, dtype), pipeline("library"))
    (spec,) = _sdpa(program)
    assert len(program.functions["f"].launches) == 1
    assert spec["scale"] == pytest.approx(0.5 * 0.17677669, rel=1e-7)
    assert spec["q"]["offset"] == 0 and spec["q"]["strides"] == spec["k"]["strides"]  # type: ignore[index]


@pytest.mark.usefixtures("cudnn_attention")
def test_a_boolean_mask_of_the_programs_becomes_cudnns_bias() -> None:
    """`select(mask, scores, -inf)` with a mask of the program's is written
    `scores + select(mask, 0, -inf)`: a small kernel writes the bias, cuDNN
    adds it (Hugging Face's padding masks through torch.compile)."""
    b, h, s, d = 2, 3, 16, 8
    program = compile_text(bool_mask_text(b, h, s, d), pipeline("library"))
    (spec,) = _sdpa(program)
    assert len(program.functions["f"].launches) == 2  # the bias, then cuDNN
    assert spec["bias"]["dims"] == [b, h, s, s]  # type: ignore[index]
    assert spec["bias"]["strides"] == [s, 0, 0, 1]  # type: ignore[index]


@pytest.mark.usefixtures("cudnn_attention")
def test_a_boolean_mask_with_a_finite_fill_stays_fusecs() -> None:
    # a row masked whole: softmax of the fill is uniform, of scores + fill not
    text = bool_mask_text(2, 3, 16, 8, fill="-3.0e+04")
    assert not _sdpa(compile_text(text, pipeline("library")))
    assert len(compile_text(text, pipeline("fused")).functions["f"].launches) == 1


def test_without_cudnn_a_boolean_mask_is_not_rewritten() -> None:
    program = compile_text(bool_mask_text(2, 3, 16, 8), pipeline())
    assert not _sdpa(program) and len(program.functions["f"].launches) == 1


def test_kv_broadcast_over_an_outer_axis_is_refused() -> None:
    """cuDNN maps query head h to K/V head h // G: K/V broadcast over any
    axis but the innermost heads is not that, and stays fusec's."""
    from fusec.analysis.strided_view import StridedView
    from fusec.scheduling.attention_library import _placed

    q = StridedView((2, 3, 16, 8), (384, 128, 8, 1), 0)
    outer = StridedView((1, 3, 16, 8), (0, 128, 8, 1), 0)  # one batch for both
    inner = StridedView((2, 1, 16, 8), (128, 0, 8, 1), 0)
    assert isinstance(_placed({"q": q, "k": inner, "v": inner, "o": q}), dict)
    assert "innermost heads" in _placed({"q": q, "k": outer, "v": outer, "o": q})  # type: ignore[operator]
    assert "different axes" in _placed({"q": q, "k": inner, "v": outer, "o": q})  # type: ignore[operator]
    shared_q = StridedView((2, 3, 16, 8), (128, 0, 8, 1), 0)  # every head one query
    assert "Q or its output" in _placed({"q": shared_q, "k": q, "v": q, "o": q})  # type: ignore[operator]


def test_without_cudnn_every_attention_is_fusecs() -> None:
    program = compile_text(vit_attention_text(16, 12, 197, 64), pipeline("library"))
    assert not _sdpa(program) and len(program.functions["f"].launches) == 1


@pytest.mark.usefixtures("cudnn_attention")
def test_a_placement_outside_its_value_is_refused(tmp_path: Path) -> None:
    """A plan whose attention would read past a buffer does not load."""
    from fusec.compiler.cli import main
    from fusec.runtime.compiled_model import read_out

    src, out = tmp_path / "a.mlir", tmp_path / "out"
    src.write_text(vit_attention_text(2, 3, 16, 8))
    assert main([str(src), "-o", str(out), "--target", "h100", "--attention", "library"]) == 0
    read_out(out)  # as written: fine
    plan = json.loads((out / "plan.json").read_text())
    (launch,) = [la for f in plan["functions"].values() for la in f["launches"]
                 if "library" in la]
    launch["q"]["offset"] = 10 ** 6
    (out / "plan.json").write_text(json.dumps(plan))
    with pytest.raises(FusecError, match="reaches element"):
        read_out(out, trust_modified_kernels=True)


@pytest.mark.usefixtures("cudnn_attention")
@pytest.mark.parametrize("fold", [True, False], ids=["folded", "computed"])
def test_a_causal_mask_is_cudnns_causal_mask(fold: bool) -> None:
    # folded: the mask is a constant; computed: without fold-constants its
    # ops go into a kernel of their own, and the group records it causal
    text = masked_text(2, 3, 16, 8)
    spec_pipeline = pipeline("library") if fold else \
        pipeline("library").replace("fold-constants,", "")
    (spec,) = _sdpa(compile_text(text, spec_pipeline))
    assert spec["causal"] is True and spec["scale"] == 0.5


@pytest.mark.usefixtures("cudnn_attention")
@pytest.mark.parametrize("predicate", ["lt", "ge"])
def test_other_masks_stay_fusecs(predicate: str) -> None:
    program = compile_text(masked_text(2, 3, 16, 8, predicate=predicate), pipeline("library"))
    assert not _sdpa(program)


def test_running_it_without_cudnn_says_how_to_do_without() -> None:
    from fusec.runtime.cudnn_sdpa import SdpaError, check_sdpa

    with pytest.raises(SdpaError, match="no cuDNN attention for cudnn_sdpa_f32"):
        check_sdpa({"library": "cudnn_sdpa_f32"})
    with pytest.raises(SdpaError, match="--attention fused"):  # no cuDNN in the simulator
        check_sdpa({"library": "cudnn_sdpa_bf16"})


def test_cudnn_without_its_package_says_what_installing_it_would_give(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """cuDNN installed (as with PyTorch) without nvidia-cudnn-frontend: the
    attention stays fusec's kernel, its remark says why, and `fusec.compile`
    says it once per process on stderr (ViT-B/16 in bf16 ran 0.98x inductor
    so, 1.46x with the package, on an H100)."""
    import fusec
    import fusec.analysis.cudnn_library as cudnn_library
    import fusec.passes.fuse_attention as fuse_attention
    from fusec.analysis.cudnn_library import FRONTEND_MISSING
    from fusec.analysis.remarks import collect_remarks
    from fusec.compiler import python_api
    from fusec.compiler.compile import compile_model

    monkeypatch.setattr(cudnn_library, "cudnn_available", lambda: True)
    monkeypatch.setattr(cudnn_library, "sdpa_available", lambda: False)
    monkeypatch.setattr(fuse_attention, "sdpa_available", lambda: False)
    python_api._note_frontend_missing.cache_clear()  # pyright: ignore[reportPrivateUsage]
    text = vit_attention_text(1, 2, 16, 8)
    artifacts = compile_model(text, target="h100")
    assert not _sdpa(artifacts.program)
    assert any(FRONTEND_MISSING in line for line in collect_remarks(artifacts.module))
    for _ in range(2):
        fusec.compile(text, device="sim", cache=False)
    err = capsys.readouterr().err
    assert err.count("fusec: note: f16/bf16 attentions run as fusec's own kernels") == 1
    python_api._note_frontend_missing.cache_clear()  # pyright: ignore[reportPrivateUsage]
    fusec.compile(text, device="sim", cache=False, attention="fused")  # asked for: no note
    assert "fusec: note" not in capsys.readouterr().err
    monkeypatch.setattr(cudnn_library, "cudnn_available", lambda: False)
    assert not any(FRONTEND_MISSING in line for line in  # no cuDNN: nothing to suggest
                   collect_remarks(compile_model(text, target="h100").module))
