"""Decode attention (`engine = "decode"`, `codegen/attention_decode.py`):
warps streaming K/V rows with lanes on head dims, checked in the simulator
against the reference interpreter at tiny sizes (one and three queries,
ragged keys, one and three splits, masks, causal, f16), plus the schedule's
text, the pass options and the model's offer under `decode=true`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from codegen_harness import check_program, compile_text, tensor
from test_attention import PIPELINE, attention_text
from xdsl.parser import Parser

from fusec.analysis.targets import H200
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.schedule import AttentionSchedule
from fusec.scheduling.attention import choose_tile, decode_time, forced_decode_tile
from fusec.scheduling.attention_schedule import AttentionShape, AttentionTile


def _forced(options: str) -> str:
    return PIPELINE.replace("fuse-attention", f"fuse-attention{{engine=decode {options}}}")


@pytest.mark.slow
def test_one_query_ragged_keys_one_split() -> None:
    # 37 keys: not a multiple of the 2 warps nor of their 2-key steps
    text = attention_text((2, 2), 1, 32, skv=37)
    program = check_program(text, 1, _forced("threads=64 cols=2 splits=1"))
    assert "xor_lanes" in program.kernels_source and "_partials" not in program.kernels_source


@pytest.mark.slow
def test_three_queries_d64_additive_mask_three_splits() -> None:
    text = attention_text((1, 2), 3, 64, mask=tensor((1, 1, 3, 45)), skv=45)
    program = check_program(text, 2, _forced("threads=64 cols=2 splits=3"))
    assert "_partials" in program.kernels_source


@pytest.mark.slow
def test_one_query_three_splits_ragged_last_chunk() -> None:
    # 4 warps x 3 keys: 12 keys a step, 50 keys in 5 steps, chunks of 2, 2 and 1 steps
    text = attention_text((2,), 1, 32, skv=50)
    check_program(text, 2, _forced("threads=128 cols=3 splits=3"))


@pytest.mark.slow
def test_causal_three_queries_with_whole_chunks_masked_are_not_nan() -> None:
    # select(row >= col, s, -inf) with 3 queries over 12 keys in 3 chunks:
    # row 0 sees key 0 only, the later chunks end with m = -inf for it
    s, skv = 3, 12
    sc = tensor((2, s, skv))
    text = attention_text((2,), s, 32, skv=skv)
    rows = ", ".join(f"[{float(i)}]" for i in range(s))
    cols = ", ".join(str(float(j)) for j in range(skv))
    masked = [
        f"  %ri = nn.constant dense<[{rows}]> : {tensor((s, 1))}",
        f"  %ci = nn.constant dense<[{cols}]> : {tensor((skv,))}",
        f"  %keep = nn.cmp %ri, %ci {{predicate = \"ge\"}} : ({tensor((s, 1))}, "
        f"{tensor((skv,))}) -> {tensor((s, skv), 'i1')}",
        "  %ninf = nn.constant dense<0xFF800000> : tensor<f32>",
        f"  %x1 = nn.select %keep, %x0, %ninf : ({tensor((s, skv), 'i1')}, {sc}, tensor<f32>) "
        f"-> {sc}",
    ]
    text = text.replace("  %p = nn.softmax %x0", "\n".join(masked) + "\n  %p = nn.softmax %x1")
    check_program(text, 2, _forced("threads=64 cols=2 splits=3"))
    check_program(text, 1, _forced("threads=64 cols=2 splits=1"))


@pytest.mark.slow
def test_half_precision_rounds_once() -> None:
    text = attention_text((1, 2), 2, 32, mask=tensor((1, 1, 2, 21)), skv=21)
    check_program(text.replace("f32>", "f16>"), 1, _forced("threads=64 cols=4 splits=1"),
                  tolerance={"float16": 1e-2})


@pytest.mark.parametrize("text", [
    "#fusion.attention<block_q = 1, block_k = 16, threads = 128, rows = 1, cols = 4, "
    "stages = 1, engine = \"decode\">",
    "#fusion.attention<block_q = 3, block_k = 8, threads = 128, rows = 3, cols = 2, "
    "stages = 1, engine = \"decode\", splits = 16>",
])
def test_decode_schedule_round_trips(text: str) -> None:
    attr = Parser(make_context(), text).parse_attribute()
    assert isinstance(attr, AttentionSchedule)
    assert str(attr) == text
    tile = AttentionTile.of(attr)
    assert tile.engine == "decode" and tile.attr() == attr and tile.problem(H200) is None


def test_decode_schedule_rejects_bad_threads() -> None:
    with pytest.raises(Exception, match="threads = 32"):
        Parser(make_context(), "#fusion.attention<block_q = 1, block_k = 16, threads = 64, "
               "rows = 1, cols = 4, stages = 1, engine = \"decode\">").parse_attribute()


def test_forced_decode_refuses_many_queries_and_odd_head_dims() -> None:
    assert isinstance(forced_decode_tile(AttentionShape(8, 5, 64, 32, 32), H200, 4, 4, None),
                      str)
    assert "multiples of 32" in str(forced_decode_tile(AttentionShape(8, 1, 64, 48, 48), H200,
                                                       4, 4, None))


def test_model_offers_decode_tiles_only_when_asked() -> None:
    shape = AttentionShape(256, 1, 4096, 128, 128)  # decode_attention.mlir
    plain = choose_tile(shape, H200, splits=1)
    assert isinstance(plain, AttentionTile) and plain.engine != "decode"
    tile = choose_tile(shape, H200, splits=1, decode=True)
    assert isinstance(tile, AttentionTile) and tile.engine == "decode"
    # splits fill the SMs: more than one block per SM in the grid
    assert 256 * tile.splits >= H200.sms
    kv = 256 * 4096 * 256 * 4
    assert kv / H200.memory_bandwidth < decode_time(tile, shape, H200) < \
        2 * kv / H200.memory_bandwidth


def test_bench_program_compiles_to_decode_kernels_under_the_option() -> None:
    text = (BENCH / "decode_attention.mlir").read_text()
    spec = "decompose,fold-constants,fuse-attention{decode=true},form-fusion-groups,group-each-op"
    program = compile_text(text, spec)
    assert "tile: decode:" in program.kernels_source
    assert "xor_lanes" in program.kernels_source


BENCH = Path(__file__).resolve().parent.parent / "bench" / "programs"


@pytest.mark.gpu
def test_decode_bench_on_gpu_engine_decode() -> None:
    import fusec
    from fusec.compiler.driver import make_registry
    from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
    from fusec.compiler.run_command import compare
    from fusec.reference.interpreter import find_function, random_inputs, run_function

    path = BENCH / "decode_attention.mlir"
    func = find_function(parse_module(make_context(), path.read_text(), str(path)), None)
    inputs = random_inputs(func, seed=7)
    expected = run_function(func, inputs)
    for options, launches in (("splits=1", 1), ("splits=8", 2)):
        ctx = make_context()
        module = parse_module(ctx, path.read_text(), str(path))
        spec = f"decompose,fold-constants,fuse-attention{{engine=decode {options}}}"
        PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), spec)).run(module)
        model = fusec.compile(str(module), fusion=True, device="gpu")
        assert model.launches == launches
        ok, message = compare(np.asarray(model(*inputs)), expected[0])
        assert ok, message
