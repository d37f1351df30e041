"""Attention tiles past numba's static 48 KiB of shared memory: the kernel
takes them from dynamic shared memory, its launch carries the bytes, and the
runtime raises the kernel's max-dynamic-shared attribute once before the
first launch (`runtime/dynamic_shared.py`). Checked in the simulator at
tiny sizes (which sizes the dynamic array from the launch), with a fake
kernel for the attribute, and on a GPU."""

from __future__ import annotations

import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from codegen_harness import check_program, compile_text, tensor
from test_attention import PIPELINE, _causal_constant, attention_text

from fusec.analysis.targets import H200, TARGETS
from fusec.runtime.dynamic_shared import allow_dynamic_shared, allow_launches
from fusec.scheduling.attention import candidate_order, legal_tiles, ranked_tiles, tile_kind
from fusec.scheduling.attention_schedule import (
    AttentionShape,
    AttentionTile,
    shared_bytes,
)

# 128 queries x 16 keys, 8x4 scores per thread: 64 threads, 55552 bytes at D = 64.
WIDE = "block_q=128 block_k=16 rows=8 cols=4 stages=1"
WIDE_PREFETCH = WIDE.replace("stages=1", "stages=2")  # 68864 bytes


def _fixed(tile: str) -> str:
    return PIPELINE.replace("fuse-attention", f"fuse-attention{{{tile}}}")


def _causal(s: int, d: int) -> str:
    text = attention_text((1, 1), s, d, mask=tensor((s, s)))
    text = text.replace(f", %mask: {tensor((s, s))}", "")
    return text.replace("  %x1 = nn.add", f"  %mask = nn.constant {_causal_constant(s)}\n"
                        "  %x1 = nn.add", 1)


def _dynamic_launch(program: Any) -> Any:
    (launch,) = program.functions["f"].launches
    assert launch.shared_bytes > H200.static_shared_limit
    assert "cuda.shared.array(0, float32" in program.kernels_source
    return launch


def test_128_query_tile_in_dynamic_shared_memory_masked_ragged() -> None:
    # S = 20: one ragged query tile, two key tiles (the second ragged), two heads
    program = check_program(attention_text((1, 2), 20, 64, mask=tensor((20, 20))), 1,
                            _fixed(WIDE))
    launch = _dynamic_launch(program)
    assert launch.shared_bytes == shared_bytes(AttentionTile(128, 16, 8, 4, 1), 64, 64) == 55552


def test_two_stage_prefetch_in_dynamic_shared_memory_causal() -> None:
    # causal, S = 33: three key tiles, the last one key long, prefetched
    _dynamic_launch(check_program(_causal(33, 64), 1, _fixed(WIDE_PREFETCH)))


def test_static_tiles_request_no_dynamic_memory() -> None:
    program = compile_text(attention_text((1, 2), 20, 8), _fixed(WIDE))
    (launch,) = program.functions["f"].launches
    assert launch.shared_bytes == 0 and "cuda.shared.array(0," not in program.kernels_source


def _fake_kernel(handle: int) -> Any:
    cufunc = SimpleNamespace(handle=handle, device=SimpleNamespace(id=0))
    return SimpleNamespace(_codelibrary=SimpleNamespace(get_cufunc=lambda: cufunc))


def test_launch_carries_the_bytes_and_the_attribute_is_raised_once() -> None:
    program = compile_text(attention_text((1, 2), 20, 64, mask=tensor((20, 20))), _fixed(WIDE))
    (launch,) = program.functions["f"].launches
    asked: list[tuple[int, int]] = []

    def setter(cufunc: Any, nbytes: int) -> None:
        asked.append((cufunc.handle, nbytes))

    kernel = _fake_kernel(0x5E1)
    assert allow_launches([launch], [kernel], setter) == 1
    assert asked == [(0x5E1, launch.shared_bytes)]
    assert allow_launches([launch], [kernel], setter) == 0  # once per loaded kernel
    assert not allow_dynamic_shared(_fake_kernel(0x5E2), H200.static_shared_limit, setter)
    assert allow_dynamic_shared(kernel, launch.shared_bytes + 1024, setter)  # more: again
    assert len(asked) == 2


@pytest.mark.parametrize("name", sorted(TARGETS))
@pytest.mark.parametrize("d", [64, 128])
def test_legal_tiles_fit_each_targets_dynamic_limit(name: str, d: int) -> None:
    target = TARGETS[name]
    shape = AttentionShape(96, 512, 512, d, d)
    tiles = legal_tiles(shape, target)
    assert tiles
    assert all(shared_bytes(t, d, d) <= target.shared_memory_per_block for t in tiles)
    assert target.static_shared_limit == 48 * 1024
    if name == "h200":
        assert any(t.block_q == 128 for t in tiles)
        # at D = 128 a two-stage tile needs more than the budget's 128 registers
        # (ptxas: 130 for the smallest, tests/test_attention_registers.py)
        assert any(t.stages == 2 for t in tiles if t.engine == "simt") == (d == 64)
        assert any(shared_bytes(t, d, d) > H200.static_shared_limit for t in tiles)
    # a smaller per-block limit (--shared-memory-limit) is respected too
    assert all(shared_bytes(t, d, d) <= 40000 for t in legal_tiles(shape, target, 40000))


def test_candidates_offer_each_kind_first() -> None:
    shape = AttentionShape(96, 512, 512, 64, 64)
    ranked = ranked_tiles(shape, H200)
    ordered = candidate_order(ranked, shape, H200)
    assert ordered[0] == ranked[0] and sorted(ordered, key=ranked.index) == ranked
    kinds = {tile_kind(t, shape, H200) for t in ranked}
    # SIMT: static / dynamic x one / two stages; mma: one stage, dynamic only
    # in f32 (Q, K and V staged twice, as TF32 big and small parts: even
    # 32 x 32 is past 48 KiB); the grid fills the GPU: no split-KV tile
    assert kinds == {(e, s, d, False) for e, s in (("simt", 1), ("simt", 2))
                     for d in (False, True)} | {("mma", 1, True, False)}
    assert {tile_kind(t, shape, H200) for t in ordered[:len(kinds)]} == kinds


@pytest.mark.gpu
def test_dynamic_shared_tile_on_gpu_matches_the_reference() -> None:
    import fusec
    from fusec.compiler.driver import make_registry
    from fusec.compiler.parsing import make_context, parse_module
    from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
    from fusec.compiler.run_command import compare
    from fusec.reference.interpreter import find_function, random_inputs, run_function

    text = attention_text((2, 3), 300, 64, mask=tensor((300, 300)))
    # 85504 bytes, two stages; 128 registers (ptxas) x 512 threads fill an SM
    tile = "block_q=128 block_k=32 rows=4 cols=2 stages=2"
    program = compile_text(text, _fixed(tile))
    assert program.functions["f"].launches[0].shared_bytes > H200.static_shared_limit
    func = find_function(parse_module(make_context(), text, "t.mlir"), None)
    inputs = random_inputs(func, seed=5)
    expected = run_function(func, inputs)
    ctx = make_context()
    module = parse_module(ctx, text, "t.mlir")
    spec = f"decompose,fold-constants,fuse-attention{{{tile}}}"
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), spec)).run(module)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.mlir"
        path.write_text(str(module))
        model = fusec.compile(path, fusion=True, device="gpu")
    assert model.launches == 1
    ok, message = compare(np.asarray(model(*inputs)), expected[0])
    assert ok, message
