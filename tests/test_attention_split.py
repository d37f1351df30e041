"""Split-KV attention (`splits` in `#fusion.attention`, `codegen/attention_
split.py`): a kernel per chunk of the keys writing partial statistics, a
second combining them; checked in the simulator against the reference
interpreter at tiny sizes (decode, few queries, ragged chunks, masks, causal
with whole chunks masked, f16), plus the schedule's text and the tile choice."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from codegen_harness import check_program, compile_text, tensor
from test_attention import PIPELINE, attention_text
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError

from fusec.analysis.targets import H200
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.schedule import AttentionSchedule
from fusec.scheduling.attention import choose_tile, fused_time, unfused_time
from fusec.scheduling.attention_schedule import AttentionShape, AttentionTile, SplitPlan

UNFUSED = "decompose,fold-constants,form-fusion-groups,group-each-op"


def _forced(tile: str) -> str:
    return PIPELINE.replace("fuse-attention", f"fuse-attention{{{tile}}}")


@pytest.mark.parametrize("splits", [2, 3, 4])
def test_decode_one_query_split_chunks_match_the_reference(splits: int) -> None:
    # 37 keys in tiles of 8: 5 tiles, chunks of 2 or 3 tiles, the last ragged
    text = attention_text((2, 2), 1, 4, skv=37)
    program = check_program(text, 2, _forced(f"block_q=1 block_k=8 rows=1 cols=2 "
                                              f"splits={splits}"))
    assert "_partials" in program.kernels_source
    plan = SplitPlan.of(37, 8, splits)
    assert f"split-KV: {plan.splits} chunks of {plan.chunk_keys} keys" in program.kernels_source


def test_unfused_decode_is_three_kernels() -> None:
    check_program(attention_text((2, 2), 1, 4, skv=37), 3, UNFUSED)


def test_three_queries_additive_mask_ragged_chunks() -> None:
    # block_q 4 > S = 3: the fourth row is computed on clamped side inputs, never stored
    text = attention_text((1, 2), 3, 8, mask=tensor((1, 1, 3, 37)), skv=37)
    check_program(text, 2, _forced("block_q=4 block_k=8 rows=2 cols=2 splits=3"))


def test_causal_rows_with_whole_chunks_masked_are_not_nan() -> None:
    # select(row >= col, s, -inf) over 12 keys in 3 chunks of 4: row 0 sees
    # key 0 only, so chunks 1 and 2 end with m = -inf, l = 0 for it
    s, sc = 12, tensor((2, 12, 12))
    text = attention_text((2,), s, 4)
    rows = ", ".join(f"[{float(i)}]" for i in range(s))
    cols = ", ".join(str(float(j)) for j in range(s))
    masked = [
        f"  %ri = nn.constant dense<[{rows}]> : {tensor((s, 1))}",
        f"  %ci = nn.constant dense<[{cols}]> : {tensor((s,))}",
        f"  %keep = nn.cmp %ri, %ci {{predicate = \"ge\"}} : ({tensor((s, 1))}, "
        f"{tensor((s,))}) -> {tensor((s, s), 'i1')}",
        "  %ninf = nn.constant dense<0xFF800000> : tensor<f32>",
        f"  %x1 = nn.select %keep, %x0, %ninf : ({tensor((s, s), 'i1')}, {sc}, tensor<f32>) "
        f"-> {sc}",
    ]
    text = text.replace("  %p = nn.softmax %x0", "\n".join(masked) + "\n  %p = nn.softmax %x1")
    check_program(text, 2, _forced("block_q=4 block_k=4 rows=2 cols=1 splits=3"))


def test_two_stage_split_starts_each_chunk_at_its_keys() -> None:
    check_program(attention_text((2,), 2, 4, skv=29), 2,
                  _forced("block_q=2 block_k=4 rows=1 cols=1 stages=2 splits=3"))


def test_half_precision_split_rounds_once_in_the_combine() -> None:
    text = attention_text((1, 2), 1, 8, mask=tensor((1, 1, 1, 40)), skv=40)
    check_program(text.replace("f32>", "f16>"), 2,
                  _forced("block_q=1 block_k=8 rows=1 cols=2 splits=2"),
                  tolerance={"float16": 1e-2})


def test_splits_one_is_the_one_kernel_schedule() -> None:
    text = attention_text((1, 2), 21, 8, mask=tensor((21, 21)))
    tile = "block_q=32 block_k=16 rows=4 cols=2 stages=1"
    plain = compile_text(text, _forced(tile))
    one = compile_text(text, _forced(tile + " splits=1"))
    assert one.kernels_source == plain.kernels_source
    assert "splits" not in str(AttentionTile(32, 16, 4, 2).attr())


@pytest.mark.parametrize("text", [
    "#fusion.attention<block_q = 1, block_k = 32, threads = 32, rows = 1, cols = 1, "
    "stages = 1, splits = 4>",
    "#fusion.attention<block_q = 1, block_k = 32, threads = 32, rows = 1, cols = 1, "
    "stages = 1, engine = \"simt\", splits = 2>",
    "#fusion.attention<block_q = 64, block_k = 32, threads = 128, rows = 16, cols = 32, "
    "stages = 1, engine = \"mma\">",
    "#fusion.attention<block_q = 64, block_k = 32, threads = 256, rows = 4, cols = 2, "
    "stages = 2>",
])
def test_schedule_round_trips_with_optional_fields_left_out(text: str) -> None:
    attr = Parser(make_context(), text).parse_attribute()
    assert isinstance(attr, AttentionSchedule)
    printed = str(attr)
    assert printed == text.replace(', engine = "simt"', "")
    assert AttentionTile.of(attr).attr() == attr


def test_schedule_rejects_an_unknown_trailing_field() -> None:
    with pytest.raises(ParseError, match="its fields are"):
        Parser(make_context(), "#fusion.attention<block_q = 1, block_k = 32, threads = 32, "
               "rows = 1, cols = 1, stages = 1, chunks = 4>").parse_attribute()


def test_decode_chooses_a_split_that_fills_the_gpu() -> None:
    # decode.mlir's attention: 32 heads, one query, 2048 keys, D 64
    shape = AttentionShape(32, 1, 2048, 64, 64)
    tile = choose_tile(shape, H200)
    assert isinstance(tile, AttentionTile) and tile.splits > 1 and tile.block_q == 1
    one = choose_tile(shape, H200, splits=1)
    assert isinstance(one, AttentionTile)
    assert fused_time(tile, shape, H200) < fused_time(one, shape, H200) / 4
    plan = tile.split_plan(shape.skv)
    # at least three quarters of the SMs get a block, chunks of 4+ K/V tiles
    assert plan.chunk_tiles >= 4 and 4 * 32 * plan.splits >= 3 * H200.sms
    assert fused_time(tile, shape, H200) < unfused_time(shape, H200)


def test_prefill_keeps_its_one_kernel_tile() -> None:
    # many query tiles already fill the GPU: no split
    tile = choose_tile(AttentionShape(96, 512, 512, 64, 64), H200)
    assert isinstance(tile, AttentionTile) and tile.splits == 1


def test_split_plan_never_makes_an_empty_chunk() -> None:
    assert SplitPlan.of(37, 8, 4) == SplitPlan(5, 2, 3, 8)  # 4 chunks of 2 would leave one empty
    assert SplitPlan.of(16, 8, 9).splits == 2
    assert SplitPlan.of(2048, 64, 8).chunk_keys == 256


BENCH = Path(__file__).resolve().parent.parent / "bench" / "programs"
FULL = ("decompose,fold-constants,fuse-attention{split-kv=true decode=false},"
        "form-fusion-groups,group-each-op")


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")
def test_decode_bench_kernels_have_no_spills() -> None:
    from fusec.codegen.ptx import compile_program_ptx

    program = compile_text((BENCH / "decode_attention.mlir").read_text(),
                           FULL + ",register-budget,tile-and-promote")
    partials, combine = program.functions["decode_attention"].launches
    assert partials.kernel.endswith("_partials") and combine.grid[0] > 1
    info = compile_program_ptx(program)
    assert info[partials.kernel]["spill_bytes"] == 0 and info[combine.kernel]["spill_bytes"] == 0
    regs = info[partials.kernel]["registers"]
    assert abs(regs - partials.est_registers) <= 0.25 * regs


@pytest.mark.gpu
def test_decode_bench_on_gpu_two_launches() -> None:
    import fusec
    from fusec.compiler.driver import make_registry
    from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
    from fusec.compiler.run_command import compare
    from fusec.reference.interpreter import find_function, random_inputs, run_function

    path = BENCH / "decode_attention.mlir"
    func = find_function(parse_module(make_context(), path.read_text(), str(path)), None)
    inputs = random_inputs(func, seed=5)
    expected = run_function(func, inputs)
    ctx = make_context()  # grouped as a split by the model's choice (not the default)
    module = parse_module(ctx, path.read_text(), str(path))
    spec = "decompose,fold-constants,fuse-attention{split-kv=true decode=false}"
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), spec)).run(module)
    model = fusec.compile(str(module), fusion=True, device="gpu")
    assert model.launches == 2
    ok, message = compare(np.asarray(model(*inputs)), expected[0])
    assert ok, message


def _decode_step() -> str:
    """probe: append the new K/V to the cache (concat), attend one query."""
    q, cache, new, kv = (tensor(s) for s in ((1, 2, 1, 4), (1, 2, 15, 4), (1, 2, 1, 4),
                                             (1, 2, 16, 4)))
    kt, sc = tensor((1, 2, 4, 16)), tensor((1, 2, 1, 16))
    return "\n".join([
        f"func.func @f(%q: {q}, %kc: {cache}, %vc: {cache}, %kn: {new}, %vn: {new}) "
        f"-> ({q}, {kv}) {{",
        f"  %k = nn.concat %kc, %kn {{axis = 2}} : ({cache}, {new}) -> {kv}",
        f"  %v = nn.concat %vc, %vn {{axis = 2}} : ({cache}, {new}) -> {kv}",
        f"  %kt = nn.transpose %k {{perm = [0, 1, 3, 2]}} : ({kv}) -> {kt}",
        f"  %s = nn.matmul %q, %kt : ({q}, {kt}) -> {sc}",
        "  %c = nn.constant dense<0.5> : tensor<f32>",
        f"  %s2 = nn.mul %s, %c : ({sc}, tensor<f32>) -> {sc}",
        f"  %p = nn.softmax %s2 {{axis = -1}} : {sc}",
        f"  %o = nn.matmul %p, %v : ({sc}, {kv}) -> {q}",
        f"  func.return %o, %k : {q}, {kv}", "}", ""])


def test_decode_step_after_the_cache_append() -> None:
    # the appended K/V (two concat kernels) read by the split attention's two
    check_program(_decode_step(), 4, _forced("block_q=1 block_k=4 rows=1 cols=1 splits=2"))


def test_large_scores_combine_relative_to_the_largest_chunk_max() -> None:
    # scores of several hundred: exp(m_i) alone would overflow f32
    text = attention_text((1, 2), 1, 8, skv=40, scale=300.0)
    check_program(text, 2, _forced("block_q=1 block_k=8 rows=1 cols=1 splits=3"))
