"""The three-kernel form of an attention pays for the copies its library
GEMMs need: a head sliced out of a packed QKV projection, or heads moved
past the tokens, is laid out by a copy kernel before cuBLAS can read it,
where the fused kernel reads it through its view. Measured on an H100
(ViT-B/16 in bf16, B16 H12 S197 D64): the two batched GEMMs took 58 us per
layer and the copies of Q, K, V and the output another 23 us, which the
gain check did not count; it kept the three kernels (estimated 60.7 us
against 66.4 us fused)."""

from __future__ import annotations

import pytest
from test_attention import _fused_groups
from test_gqa import bmm_attention_text, fused_qkv_attention_text

from fusec.analysis.decompose_group import decomposed
from fusec.analysis.group_body import GroupBody
from fusec.analysis.targets import TARGETS
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.dialects.fusion import GroupOp
from fusec.scheduling.attention import unfused_time
from fusec.scheduling.attention_group import AttentionSizes, find_pattern

SPEC = ('decompose,sink-transposes,unmerge-broadcasts,cse,dce,fold-constants,'
        'fuse-attention{target="h100"}')


def _sizes(text: str) -> AttentionSizes:
    """The sizes of the attention group `fuse-attention` forms (no library
    here: every attention is fused)."""
    ctx = make_context()
    module = parse_module(ctx, text, "attention.mlir")
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), SPEC)).run(module)
    group = next(op for op in module.walk() if isinstance(op, GroupOp))
    with decomposed(group) as flat:
        return AttentionSizes.of(find_pattern(GroupBody.of(flat)))


def test_packed_projection_operands_need_copies() -> None:
    assert _sizes(fused_qkv_attention_text(2, 3, 16, 8)).relayout == ("q", "k", "v")


def test_plain_operands_are_read_in_place() -> None:
    # Q and V row-major, K read transposed, the output written row-major
    assert _sizes(bmm_attention_text(2, 3, 16, 8)).relayout == ()


def test_copies_priced_only_beside_library_gemms() -> None:
    sizes = _sizes(fused_qkv_attention_text(16, 12, 197, 64, "bf16"))
    plain = AttentionSizes(sizes.batch, sizes.s, sizes.skv, sizes.d, sizes.dv, sizes.element)
    target = TARGETS["h100"]
    # the copies are priced only where a library GEMM would need them
    assert unfused_time(sizes.sizes(5), target, "auto", True) > \
        unfused_time(plain.sizes(5), target, "auto", True)
    assert unfused_time(sizes.sizes(5), target, "auto", False) == \
        unfused_time(plain.sizes(5), target, "auto", False)


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_vit_attention_over_a_packed_projection_fuses_beside_library_gemms(
        dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import fusec.scheduling.gemm_choice as gemm_choice

    monkeypatch.setattr(gemm_choice, "library_available", lambda: True)
    assert _fused_groups(fused_qkv_attention_text(16, 12, 197, 64, dtype), SPEC) == 1
