"""cuDNN's fused attention on a real GPU (skipped without one, without cuDNN
or without the nvidia-cudnn-frontend package): a ViT block's attention over
a packed QKV projection, its output written into `[batch, tokens, heads *
dim]`, in f16 and bf16, at ViT-B/16's odd sequence length and at a longer
one, unmasked and causal, against the reference interpreter; grouped-query
attention with each K/V head read in place by its group of query heads;
a padding mask added to the scores as cuDNN's bias; once more under
CUDA-graph capture."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from test_gqa import gqa_bmm_text, gqa_text
from test_library_attention import bool_mask_text, masked_text, padded_text, vit_attention_text

pytestmark = pytest.mark.gpu
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from library_check import compare  # noqa: E402


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fusec.analysis.cudnn_library import sdpa_available

    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path / "cache"))
    if not sdpa_available():
        pytest.skip("cuDNN's attention (cuDNN and nvidia-cudnn-frontend) is not installed")


def _check(text: str, dt: str, graphs: bool = False) -> None:
    import fusec

    model = fusec.compile(text, device="gpu", attention="library", graphs=graphs, cache=False)
    launches = model.signature.launches
    assert [la.library["library"] for la in launches if la.library] == [f"cudnn_sdpa_{dt}"]
    assert len(launches) == 1
    ok, line = compare(model, text, dt, graphs)
    assert ok, line


@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize(("b", "h", "s", "d"), [(4, 12, 197, 64), (2, 8, 512, 128)])
def test_cudnn_attention_matches_the_reference(b: int, h: int, s: int, d: int, dt: str) -> None:
    _check(vit_attention_text(b, h, s, d, dt), dt)


@pytest.mark.parametrize(("dt", "s"), [("bf16", 197), ("f16", 256)])
def test_cudnn_causal_attention_matches_the_reference(dt: str, s: int) -> None:
    _check(masked_text(2, 12, s, 64, dt), dt)


@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["plain", "causal"])
def test_cudnn_grouped_query_attention_matches_the_reference(dt: str, causal: bool) -> None:
    # a Llama block's shape: 16 query heads over 4 K/V heads
    _check(gqa_text(2, 4, 4, 256, 64, dt, causal=causal), dt)


def test_cudnn_grouped_query_attention_in_the_bmm_form() -> None:
    _check(gqa_bmm_text(2, 4, 4, 256, 64).replace("f32", "bf16"), "bf16")


@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize(("b", "h", "s", "mask"), [
    (4, 12, 197, None), (2, 8, 256, None), (2, 8, 256, (2, 1, 256, 256))],
    ids=["padding-197", "padding-256", "per-query-256"])
def test_cudnn_attention_with_a_mask_tensor_matches_the_reference(
        b: int, h: int, s: int, mask: tuple[int, ...] | None, dt: str) -> None:
    _check(padded_text(b, h, s, 64, dt, mask), dt)


@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_a_boolean_padding_mask_on_cudnn_matches_the_reference(dt: str) -> None:
    import fusec

    text = bool_mask_text(4, 12, 197, 64, dt)
    model = fusec.compile(text, device="gpu", attention="library", graphs=False, cache=False)
    assert [la.library["library"] for la in model.signature.launches if la.library] == \
        [f"cudnn_sdpa_{dt}"]
    ok, line = compare(model, text, dt, False)
    assert ok, line


def test_cudnn_attention_under_graph_capture() -> None:
    pytest.importorskip("cupy")
    _check(vit_attention_text(2, 12, 197, 64, "bf16"), "bf16", graphs=True)


def test_autotune_times_cudnn_against_fusecs_kernel(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`--autotune` measures both ways to run ViT-B/16's attention and
    keeps the faster; the program it keeps matches the reference."""
    import json

    import fusec
    from fusec.compiler.cli import main

    monkeypatch.setenv("FUSEC_TUNING_CACHE", str(tmp_path / "tuning"))
    text = vit_attention_text(16, 12, 197, 64, "bf16")
    (tmp_path / "a.mlir").write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    assert main([str(tmp_path / "a.mlir"), "-o", str(out), "--autotune", "--quiet"]) == 0
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    (choice,) = [c for c in plan["autotune"]["library_choices"] if c["family"] == "attention"]
    assert choice["library_us"] > 0 and choice["own_us"] > 0 and not choice["from_cache"]
    print(f"cuDNN {choice['library_us']} us, fusec's kernel {choice['own_us']} us: "
          f"{choice['kept']}")
    launches = plan["functions"]["f"]["launches"]
    assert any("library" in la for la in launches) == (choice["kept"] == "library")
    ok, line = compare(fusec.load_out(out, device="gpu"), text, "bf16", False)
    assert ok, line
