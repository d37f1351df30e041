"""bf16 programs on the CUDA-graph call path on a real GPU (skipped
without one): torch.bfloat16 CUDA inputs read in place and torch.bfloat16
results written by the graph, several calls with different inputs (no
result overwritten by a later call), float32 inputs rounded on the way in
(torch on the device, NumPy on the host), numbers against the reference at
bf16's tolerance."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.element_types import element, round_to_bf16
from fusec.reference.interpreter import find_function, random_inputs, run_function

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from half_precision import retype  # noqa: E402

# The bench models in bf16, at sizes a test can afford.
CHAIN16 = retype((ROOT / "bench" / "models" / "chain16.mlir").read_text(encoding="utf-8"),
                 "bf16").replace("268435456", "1048576")
SOFTMAX = retype((ROOT / "bench" / "models" / "softmax.mlir").read_text(encoding="utf-8"),
                 "bf16").replace("16384x", "256x")
TOL = element("bf16").tolerance


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path / "cache"))


def _func(text: str) -> Any:
    return find_function(parse_module(make_context(), text, "m.mlir"), None)


def _inputs(text: str, seed: int) -> list[np.ndarray]:
    """Random inputs rounded to bf16 (float32 arrays), as both sides see them."""
    return [round_to_bf16(a) for a in random_inputs(_func(text), seed=seed)]


def _close(got: Any, want: np.ndarray) -> None:
    if hasattr(got, "detach"):
        got = got.detach().float().cpu().numpy()
    scale = max(1.0, float(np.abs(want).max()))
    assert float(np.abs(np.asarray(got, np.float64) - want).max()) <= TOL * scale


@pytest.mark.parametrize("text", [CHAIN16, SOFTMAX], ids=["chain16", "softmax"])
def test_bf16_torch_calls_replay_graphs_and_keep_results(text: str) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("cupy")
    import fusec

    model = fusec.compile(text, device="gpu")
    plain = fusec.compile(text, device="gpu", graphs=False)
    kept, wants = [], []
    for seed in range(6):  # call 1 plain, then captures per address, then replays
        host = _inputs(text, seed)
        ins = [torch.from_numpy(a).to(torch.bfloat16).cuda() for a in host]
        out = model(*ins)
        assert isinstance(out, torch.Tensor) and out.is_cuda and out.dtype == torch.bfloat16
        assert all(out.data_ptr() != k.data_ptr() for k in kept)
        torch.testing.assert_close(out, plain(*ins), rtol=0, atol=0)
        kept.append(out)
        wants.append(run_function(_func(text), host)[0])
    torch.cuda.synchronize()
    for out, want in zip(kept, wants, strict=True):  # no call overwrote an earlier result
        _close(out, want)
    runner = model.executor.graph
    assert runner is not None and runner.cache.entries  # read in place, not copied


def test_bf16_float32_callers_are_rounded_on_the_way_in() -> None:
    """NumPy float32 (rounded by fusec, copied in) and torch CUDA float32
    (rounded by torch): the same numbers as bf16 inputs."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("cupy")
    import fusec

    model = fusec.compile(SOFTMAX, device="gpu")
    for seed in range(4):
        raw = random_inputs(_func(SOFTMAX), seed=30 + seed)  # float32, not yet rounded
        want = run_function(_func(SOFTMAX), [round_to_bf16(a) for a in raw])[0]
        out_n = model(*raw)
        assert isinstance(out_n, np.ndarray) and out_n.dtype == np.float32
        out_t = model(*[torch.from_numpy(a).cuda() for a in raw])
        assert out_t.dtype == torch.bfloat16 and out_t.is_cuda
        _close(out_n, want)
        _close(out_t, want)
        np.testing.assert_array_equal(out_n, out_t.float().cpu().numpy())
    assert model.executor.graph is not None
