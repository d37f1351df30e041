"""Grouped-query and multi-query attention (`repeat_kv`): `unmerge-broadcasts`
lets the attention (and pointwise readers) read each K/V head in place for
its `G` query heads instead of a copy kernel repeating them; one kernel on
both attention engines, numbers against the reference interpreter in the
simulator, and the default pipeline on the realistic bench program."""

from __future__ import annotations

from pathlib import Path

import pytest
from codegen_harness import check_program, compile_text, tensor

BENCH = Path(__file__).resolve().parent.parent / "bench" / "programs"
HEAD = "decompose,sink-transposes,unmerge-broadcasts,cse,dce,fold-constants"
TAIL = "form-fusion-groups,group-each-op"
SIMT = f"{HEAD},fuse-attention{{block_q=16 block_k=16 rows=2 cols=2}},{TAIL}"
MMA = f"{HEAD},fuse-attention{{block_q=32 block_k=16 engine=mma}},{TAIL}"
HALF_TOLERANCE = {"float16": 1e-2, "bfloat16": 4e-2, "float32": 4e-2}


def _repeat(name: str, b: int, hkv: int, g: int, s: int, d: int, dtype: str,
            heads_last: bool = False) -> tuple[list[str], str]:
    """Lines repeating `%name` ([b, hkv, s, d], or [b, s, hkv, d] with
    `heads_last`, then transposed after the merge) over `g` query heads."""
    t = lambda *shape: tensor(shape, dtype)  # noqa: E731
    if heads_last:
        lines = [
            f"  %{name}1 = nn.reshape %{name} : ({t(b, s, hkv, d)}) -> {t(b, s, hkv, 1, d)}",
            f"  %{name}2 = nn.broadcast_to %{name}1 : ({t(b, s, hkv, 1, d)}) -> "
            f"{t(b, s, hkv, g, d)}",
            f"  %{name}3 = nn.reshape %{name}2 : ({t(b, s, hkv, g, d)}) -> {t(b, s, hkv * g, d)}",
            f"  %{name}4 = nn.transpose %{name}3 {{perm = [0, 2, 1, 3]}} : "
            f"({t(b, s, hkv * g, d)}) -> {t(b, hkv * g, s, d)}",
        ]
        return lines, f"%{name}4"
    lines = [
        f"  %{name}1 = nn.reshape %{name} : ({t(b, hkv, s, d)}) -> {t(b, hkv, 1, s, d)}",
        f"  %{name}2 = nn.broadcast_to %{name}1 : ({t(b, hkv, 1, s, d)}) -> {t(b, hkv, g, s, d)}",
        f"  %{name}3 = nn.reshape %{name}2 : ({t(b, hkv, g, s, d)}) -> {t(b, hkv * g, s, d)}",
    ]
    return lines, f"%{name}3"


def gqa_text(b: int, hkv: int, g: int, s: int, d: int, dtype: str = "f32",
             causal: bool = False, heads_last: bool = False) -> str:
    """`@f(q, k, v)`: attention of `hkv * g` query heads over `hkv` K/V heads."""
    t = lambda *shape: tensor(shape, dtype)  # noqa: E731
    h = hkv * g
    q, sc, kt = t(b, h, s, d), t(b, h, s, s), t(b, h, d, s)
    kv = t(b, s, hkv, d) if heads_last else t(b, hkv, s, d)
    klines, k = _repeat("k", b, hkv, g, s, d, dtype, heads_last)
    vlines, v = _repeat("v", b, hkv, g, s, d, dtype, heads_last)
    lines = [f"func.func @f(%q: {q}, %k: {kv}, %v: {kv}) -> {q} {{", *klines, *vlines,
             f"  %kt = nn.transpose {k} {{perm = [0, 1, 3, 2]}} : ({q}) -> {kt}",
             f"  %s = nn.matmul %q, %kt : ({q}, {kt}) -> {sc}",
             f"  %c = nn.constant dense<0.5> : {t()}",
             f"  %x = nn.mul %s, %c : ({sc}, {t()}) -> {sc}"]
    x = "%x"
    if causal:
        rows = ", ".join(f"[{float(i)}]" for i in range(s))
        cols = ", ".join(str(float(j)) for j in range(s))
        lines += [
            f"  %ri = nn.constant dense<[{rows}]> : {tensor((s, 1))}",
            f"  %ci = nn.constant dense<[{cols}]> : {tensor((s,))}",
            f"  %keep = nn.cmp %ri, %ci {{predicate = \"ge\"}} : ({tensor((s, 1))}, "
            f"{tensor((s,))}) -> {tensor((s, s), 'i1')}",
            f"  %ninf = nn.constant dense<-1.0e+04> : {t()}",
            f"  %xm = nn.select %keep, %x, %ninf : ({tensor((s, s), 'i1')}, {sc}, {t()}) -> {sc}",
        ]
        x = "%xm"
    lines += [f"  %p = nn.softmax {x} {{axis = -1}} : {sc}",
              f"  %o = nn.matmul %p, {v} : ({sc}, {q}) -> {q}",
              f"  func.return %o : {q}", "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("pipeline", [SIMT, pytest.param(MMA, marks=pytest.mark.slow)],
                         ids=["simt", "mma"])
@pytest.mark.parametrize(("hkv", "g"), [(2, 2), (1, 4)], ids=["gqa-g2", "mqa"])
def test_gqa_one_kernel(pipeline: str, hkv: int, g: int) -> None:
    program = check_program(gqa_text(2, hkv, g, 10, 8), 1, pipeline)  # no copy kernels
    assert ("mma_row_f32(" in program.kernels_source) == (pipeline == MMA)


@pytest.mark.parametrize("pipeline", [SIMT, pytest.param(MMA, marks=pytest.mark.slow)],
                         ids=["simt", "mma"])
def test_causal_gqa_four_groups(pipeline: str) -> None:
    check_program(gqa_text(1, 2, 4, 9, 8, causal=True), 1, pipeline)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
@pytest.mark.parametrize("pipeline", [SIMT, pytest.param(MMA, marks=pytest.mark.slow)],
                         ids=["simt", "mma"])
def test_half_gqa(pipeline: str, dtype: str) -> None:
    check_program(gqa_text(1, 2, 2, 11, 16, dtype), 1, pipeline, tolerance=HALF_TOLERANCE)


def test_heads_last_transposed_after_the_merge() -> None:
    # K/V as [B, S, Hkv, D]: the merge happens before the head transpose
    check_program(gqa_text(2, 2, 3, 7, 8, heads_last=True), 1, SIMT)


def test_one_group_is_plain_attention() -> None:
    # G = 1: the broadcast expands nothing; it is dropped, not copied
    check_program(gqa_text(1, 2, 1, 8, 8), 1, SIMT)


def test_without_the_pass_the_heads_are_copied() -> None:
    # the regression this pass removes: two copy kernels before the attention
    program = compile_text(gqa_text(1, 2, 2, 8, 8), SIMT.replace("unmerge-broadcasts,", ""))
    assert len(program.functions["f"].launches) == 3


POINTWISE = """\
func.func @f(%x: tensor<2x6x5x4xf32>, %y: tensor<2x2x5x4xf32>, %b: tensor<4xf32>)
    -> tensor<2x6x5x4xf32> {
  %y1 = nn.reshape %y : (tensor<2x2x5x4xf32>) -> tensor<2x2x1x5x4xf32>
  %y2 = nn.broadcast_to %y1 : (tensor<2x2x1x5x4xf32>) -> tensor<2x2x3x5x4xf32>
  %y3 = nn.reshape %y2 : (tensor<2x2x3x5x4xf32>) -> tensor<2x6x5x4xf32>
  %a = nn.add %x, %y3 : (tensor<2x6x5x4xf32>, tensor<2x6x5x4xf32>) -> tensor<2x6x5x4xf32>
  %e = nn.exp %a : tensor<2x6x5x4xf32>
  %r = nn.mul %e, %b : (tensor<2x6x5x4xf32>, tensor<4xf32>) -> tensor<2x6x5x4xf32>
  func.return %r : tensor<2x6x5x4xf32>
}
"""


def test_pointwise_reader_of_a_merged_broadcast() -> None:
    pipeline = f"{HEAD},{TAIL}"
    check_program(POINTWISE, 1, pipeline)
    before = compile_text(POINTWISE, pipeline.replace("unmerge-broadcasts,", ""))
    assert len(before.functions["f"].launches) == 2


def test_reduction_over_the_merged_heads_stays_merged() -> None:
    # a sum over the merged axis counts each repeated head: the seed stays
    # merged for all its readers (2 kernels, as without the pass), and the
    # numbers are right
    text = POINTWISE.replace(
        "  %r = nn.mul %e, %b : (tensor<2x6x5x4xf32>, tensor<4xf32>) -> tensor<2x6x5x4xf32>\n"
        "  func.return %r : tensor<2x6x5x4xf32>",
        "  %r = nn.reduce_sum %y3 {axes = [1], keepdims = true} : (tensor<2x6x5x4xf32>) -> "
        "tensor<2x1x5x4xf32>\n  %z = nn.add %e, %r : (tensor<2x6x5x4xf32>, tensor<2x1x5x4xf32>)"
        " -> tensor<2x6x5x4xf32>\n  func.return %z : tensor<2x6x5x4xf32>")
    assert "%z" in text
    check_program(text, 2, f"{HEAD},{TAIL}")


def test_bench_program_is_one_kernel() -> None:
    text = (BENCH / "gqa_attention.mlir").read_text()
    program = compile_text(text, f"{HEAD},fuse-attention{{target=h200}},{TAIL}")
    assert len(program.functions["gqa_attention"].launches) == 1


def bmm_attention_text(b: int, h: int, s: int, d: int, dtype: str = "f32") -> str:
    """Attention as PyTorch's decomposition writes a 4-D matmul: the batch and
    head axes merged into one (`[B*H, S, D]`), a 3-D matmul, then split again."""
    t = lambda *shape: tensor(shape, dtype)  # noqa: E731
    q, kt, sc = t(b, h, s, d), t(b, h, d, s), t(b, h, s, s)
    m = lambda *shape: t(b * h, *shape)  # noqa: E731
    return "\n".join([
        f"func.func @f(%q: {q}, %k: {q}, %v: {q}) -> {q} {{",
        f"  %kt = nn.transpose %k {{perm = [0, 1, 3, 2]}} : ({q}) -> {kt}",
        f"  %q3 = nn.reshape %q : ({q}) -> {m(s, d)}",
        f"  %k3 = nn.reshape %kt : ({kt}) -> {m(d, s)}",
        f"  %s3 = nn.matmul %q3, %k3 : ({m(s, d)}, {m(d, s)}) -> {m(s, s)}",
        f"  %s = nn.reshape %s3 : ({m(s, s)}) -> {sc}",
        f"  %c = nn.constant dense<0.5> : {t()}",
        f"  %x = nn.mul %s, %c : ({sc}, {t()}) -> {sc}",
        f"  %p = nn.softmax %x {{axis = -1}} : {sc}",
        f"  %p3 = nn.reshape %p : ({sc}) -> {m(s, s)}",
        f"  %v3 = nn.reshape %v : ({q}) -> {m(s, d)}",
        f"  %o3 = nn.matmul %p3, %v3 : ({m(s, s)}, {m(s, d)}) -> {m(s, d)}",
        f"  %o = nn.reshape %o3 : ({m(s, d)}) -> {q}",
        f"  func.return %o : {q}", "}"]) + "\n"


@pytest.mark.parametrize("pipeline", [SIMT, pytest.param(MMA, marks=pytest.mark.slow)],
                         ids=["simt", "mma"])
def test_bmm_form_attention_is_one_kernel(pipeline: str) -> None:
    # the merged batch axes are unmerged at the matmuls, which broadcast
    # them: the attention matcher sees softmax(Q Kᵀ) V on [B, H, ...]
    check_program(bmm_attention_text(2, 3, 16, 8), 1, pipeline)


def test_bmm_form_attention_without_the_pass() -> None:
    program = compile_text(bmm_attention_text(2, 3, 16, 8), SIMT.replace("unmerge-broadcasts,", ""))
    assert len(program.functions["f"].launches) > 1


def _unbind_qkv(b: int, h: int, s: int, d: int, dtype: str) -> list[str]:
    """Lines unbinding `%qkv` (`[B, S, 3*H*D]`) into `%q4`, `%k4`, `%v4` of
    `[B, H, S, D]`, as a fused QKV projection's readers do: reshaped to
    `[B, S, 3, H, D]`, permuted to `[3, B, H, S, D]`, three slices, each
    squeezed."""
    t = lambda *shape: tensor(shape, dtype)  # noqa: E731
    five, perm, one = t(b, s, 3, h, d), t(3, b, h, s, d), t(1, b, h, s, d)
    lines = [f"  %r = nn.reshape %qkv : ({t(b, s, 3 * h * d)}) -> {five}",
             f"  %p = nn.transpose %r {{perm = [2, 0, 3, 1, 4]}} : ({five}) -> {perm}"]
    for i, name in enumerate("qkv"):
        lines += [f"  %{name}1 = nn.slice %p {{starts = [{i}, 0, 0, 0, 0], "
                  f"limits = [{i + 1}, {b}, {h}, {s}, {d}]}} : ({perm}) -> {one}",
                  f"  %{name}4 = nn.reshape %{name}1 : ({one}) -> {t(b, h, s, d)}"]
    return lines


def fused_qkv_attention_text(b: int, h: int, s: int, d: int, dtype: str = "f32") -> str:
    """Attention over a fused QKV projection's output, as a ViT or BERT block
    writes it: `[B, S, 3*H*D]` reshaped to `[B, S, 3, H, D]`, permuted to
    `[3, B, H, S, D]` and unbound by three slices, which all read the permute."""
    t = lambda *shape: tensor(shape, dtype)  # noqa: E731
    q, kt, sc = t(b, h, s, d), t(b, h, d, s), t(b, h, s, s)
    lines = [f"func.func @f(%qkv: {t(b, s, 3 * h * d)}) -> {q} {{",
             *_unbind_qkv(b, h, s, d, dtype)]
    lines += [f"  %kt = nn.transpose %k4 {{perm = [0, 1, 3, 2]}} : ({q}) -> {kt}",
              f"  %s = nn.matmul %q4, %kt : ({q}, {kt}) -> {sc}",
              f"  %c = nn.constant dense<0.5> : {t()}",
              f"  %x = nn.mul %s, %c : ({sc}, {t()}) -> {sc}",
              f"  %pr = nn.softmax %x {{axis = -1}} : {sc}",
              f"  %o = nn.matmul %pr, %v4 : ({sc}, {q}) -> {q}",
              f"  func.return %o : {q}", "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("pipeline", [SIMT, pytest.param(MMA, marks=pytest.mark.slow)],
                         ids=["simt", "mma"])
def test_attention_reads_a_fused_qkv_in_place(pipeline: str) -> None:
    # the permute that three slices share is cloned per operand: Q, K and V
    # are each read in place from the projection, no copy kernel before
    check_program(fused_qkv_attention_text(2, 2, 16, 8), 1, pipeline)


def scaled_qkv_bmm_text(b: int, h: int, s: int, d: int) -> str:
    """A window attention as timm's Swin writes it through `torch.compile`: Q,
    K and V unbound from a fused projection by slices and squeezes
    (`[1, B, H, S, D]` to `[B, H, S, D]`), Q scaled before `Q Kᵀ`, both
    matmuls in the `bmm` form (`bmm_attention_text`), a bias on the scores."""
    t = lambda *shape: tensor(shape, "f32")  # noqa: E731
    q, kt, sc = t(b, h, s, d), t(b, h, d, s), t(b, h, s, s)
    m = lambda *shape: t(b * h, *shape)  # noqa: E731
    lines = [f"func.func @f(%qkv: {t(b, s, 3 * h * d)}, %bias: {t(1, h, s, s)}) -> {q} {{",
             *_unbind_qkv(b, h, s, d, "f32")]
    lines += [f"  %c = nn.constant dense<0.35> : {t()}",
              f"  %qs = nn.mul %q4, %c : ({q}, {t()}) -> {q}",
              f"  %kt = nn.transpose %k4 {{perm = [0, 1, 3, 2]}} : ({q}) -> {kt}",
              f"  %q3 = nn.reshape %qs : ({q}) -> {m(s, d)}",
              f"  %k3 = nn.reshape %kt : ({kt}) -> {m(d, s)}",
              f"  %s3 = nn.matmul %q3, %k3 : ({m(s, d)}, {m(d, s)}) -> {m(s, s)}",
              f"  %s4 = nn.reshape %s3 : ({m(s, s)}) -> {sc}",
              f"  %x = nn.add %s4, %bias : ({sc}, {t(1, h, s, s)}) -> {sc}",
              f"  %pr = nn.softmax %x {{axis = -1}} : {sc}",
              f"  %p3 = nn.reshape %pr : ({sc}) -> {m(s, s)}",
              f"  %v3 = nn.reshape %v4 : ({q}) -> {m(s, d)}",
              f"  %o3 = nn.matmul %p3, %v3 : ({m(s, s)}, {m(s, d)}) -> {m(s, d)}",
              f"  %o = nn.reshape %o3 : ({m(s, d)}) -> {q}",
              f"  func.return %o : {q}", "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("pipeline", [SIMT, pytest.param(MMA, marks=pytest.mark.slow)],
                         ids=["simt", "mma"])
def test_squeezed_operands_of_the_bmm_form_stay_unsplit(pipeline: str) -> None:
    # once `P V` reads V's squeeze (`[1, B, H, S, D]` to `[B, H, S, D]`)
    # directly, that squeeze merges no two axes of extent > 1: were it taken
    # unmerged, `P V` would run on `[1, B, H, ...]` behind a reshape of the
    # probabilities and the attention would not fuse (5 kernels); the scale
    # of Q moves onto the scores (`passes/fuse_attention_scale.py`), so the
    # attention is the one kernel (before that, the scaled Q was a second)
    check_program(scaled_qkv_bmm_text(2, 3, 16, 8), 1, pipeline)


def shifted_window_text(b: int, nw: int, h: int, s: int, d: int, dtype: str = "f32") -> str:
    """A shifted-window attention as timm's Swin writes it through
    `torch.compile`: `scaled_qkv_bmm_text` over `b * nw` windows, a relative
    position bias `[1, H, S, S]`, then the scores split to `[B, nW, H, S, S]`
    for the shift mask of each window (`[1, nW, 1, S, S]`) and merged back
    before the softmax."""
    t = lambda *shape: tensor(shape, dtype)  # noqa: E731
    bw = b * nw
    text = scaled_qkv_bmm_text(bw, h, s, d).replace("f32", dtype)
    sc, five, mask = t(bw, h, s, s), t(b, nw, h, s, s), t(1, nw, 1, s, s)
    text = text.replace(f"%bias: {t(1, h, s, s)})", f"%bias: {t(h, s, s)}, %mask: {t(nw, s, s)})")
    return text.replace(f"  %x = nn.add %s4, %bias : ({sc}, {t(1, h, s, s)})", "\n".join([
        f"  %b4 = nn.reshape %bias : ({t(h, s, s)}) -> {t(1, h, s, s)}",
        f"  %x4 = nn.add %s4, %b4 : ({sc}, {t(1, h, s, s)}) -> {sc}",
        f"  %x5 = nn.reshape %x4 : ({sc}) -> {five}",
        f"  %m3 = nn.reshape %mask : ({t(nw, s, s)}) -> {t(nw, 1, s, s)}",
        f"  %m5 = nn.reshape %m3 : ({t(nw, 1, s, s)}) -> {mask}",
        f"  %y5 = nn.add %x5, %m5 : ({five}, {mask}) -> {five}",
        f"  %x = nn.reshape %y5 : ({five})"]))


@pytest.mark.parametrize("pipeline", [SIMT, pytest.param(MMA, marks=pytest.mark.slow)],
                         ids=["simt", "mma"])
@pytest.mark.parametrize("b", [pytest.param(2, marks=pytest.mark.slow), 1])
def test_shifted_window_attention_is_one_kernel(pipeline: str, b: int) -> None:
    # the split of the scores to [B, nW, H, S, S] moves above Q Kᵀ (Q and
    # Kᵀ reshaped), the merge back seeds the softmax and P V: the attention
    # runs on [B, nW, H, ...], the mask read per window; Q's scale moves onto
    # the scores: one kernel (before: 6, a copy of the permuted projection,
    # the scaled Q, Q Kᵀ with the bias, the mask's add, the softmax and P V;
    # then 2, the scaled Q and the attention)
    check_program(shifted_window_text(b, 4, 3, 9, 8), 1, pipeline, seed=b)


def gqa_bmm_text(b: int, hkv: int, g: int, s: int, d: int) -> str:
    """Grouped-query attention as a `torch.compile` graph of a Llama block
    writes it: K and V repeated over the `g` query heads of each K/V head,
    then the attention in the `bmm` form (`bmm_attention_text`)."""
    h = hkv * g
    text = bmm_attention_text(b, h, s, d).replace("%k3", "%kb").replace("%v3", "%vb")
    klines, k = _repeat("k", b, hkv, g, s, d, "f32")
    vlines, v = _repeat("v", b, hkv, g, s, d, "f32")
    kv, q = tensor((b, hkv, s, d)), tensor((b, h, s, d))
    head, body = text.split("\n", 1)
    head = head.replace(f"%k: {q}, %v: {q}", f"%k: {kv}, %v: {kv}")
    body = body.replace("nn.transpose %k ", f"nn.transpose {k} ").replace(
        "nn.reshape %v ", f"nn.reshape {v} ")
    return "\n".join([head, *klines, *vlines, body])


@pytest.mark.parametrize("pipeline", [SIMT, pytest.param(MMA, marks=pytest.mark.slow)],
                         ids=["simt", "mma"])
def test_repeat_kv_behind_the_bmm_form_is_one_kernel(pipeline: str) -> None:
    # the bmm form's matmuls are unmerged after the repeat_kv they read was
    # split, so the split reaches them in a second walk: K and V are read in
    # place, no kernel copies the repeated heads (Llama through torch.compile)
    check_program(gqa_bmm_text(2, 2, 3, 16, 8), 1, pipeline)
