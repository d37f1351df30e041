"""Per-address graph replay on a real GPU (skipped without one): device
arrays read and written in place, against plain launches and the
reference; no stale address after the arrays change; results of one call
never overwritten by the next; NumPy and device inputs mixed; library
GEMMs captured through the direct cuBLAS handle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fusec.compiler.parsing import make_context, parse_module
from fusec.reference.interpreter import find_function, random_inputs, run_function

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parent.parent
GPT2_SMALL = ROOT / "bench" / "models" / "launch_path" / "gpt2_block_small.mlir"
CHAIN = """func.func @f(%x: tensor<4096xf32>, %y: tensor<4096xf32>) -> tensor<4096xf32> {
  %0 = nn.mul %x, %y : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  %1 = nn.exp %0 : tensor<4096xf32>
  %2 = nn.add %1, %x : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  func.return %2 : tensor<4096xf32>
}
"""
MLP = """func.func @mlp(%x: tensor<2x64x128xf32>, %w1: tensor<128x256xf32>,
                    %w2: tensor<256x128xf32>) -> tensor<2x64x128xf32> {
  %h = nn.matmul %x, %w1 : (tensor<2x64x128xf32>, tensor<128x256xf32>) -> tensor<2x64x256xf32>
  %a = nn.silu %h : tensor<2x64x256xf32>
  %y = nn.matmul %a, %w2 : (tensor<2x64x256xf32>, tensor<256x128xf32>) -> tensor<2x64x128xf32>
  func.return %y : tensor<2x64x128xf32>
}
"""


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path / "cache"))


def _func(text: str) -> Any:
    return find_function(parse_module(make_context(), text, "m.mlir"), None)


def _expected(text: str, host: list[np.ndarray]) -> np.ndarray:
    return run_function(_func(text), host)[0]


def _close(got: Any, want: np.ndarray, rel: float = 1e-5) -> None:
    got = got.detach().cpu().numpy() if hasattr(got, "detach") else np.asarray(got)
    scale = max(1.0, float(np.abs(want).max()))
    assert float(np.abs(got - want).max()) <= rel * scale


def test_new_arrays_each_call_no_stale_address_and_results_kept() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("cupy")
    import fusec

    model = fusec.compile(CHAIN, device="gpu")
    plain = fusec.compile(CHAIN, device="gpu", graphs=False)
    kept, wants = [], []
    for seed in range(6):  # call 1 plain, then captures per address, then replays
        host = random_inputs(_func(CHAIN), seed=seed)
        ins = [torch.from_numpy(a).cuda() for a in host]
        out = model(*ins)
        assert isinstance(out, torch.Tensor) and out.is_cuda
        assert all(out.data_ptr() != k.data_ptr() for k in kept)
        torch.testing.assert_close(out, plain(*ins), rtol=1e-6, atol=1e-6)
        kept.append(out)
        wants.append(_expected(CHAIN, host))
    torch.cuda.synchronize()
    for out, want in zip(kept, wants, strict=True):  # no call overwrote an earlier result
        _close(out, want)
    runner = model.executor.graph
    assert runner is not None and runner.cache.entries  # read in place, not copied


def test_arrays_changed_in_place_are_read_again() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("cupy")
    import fusec

    model = fusec.compile(CHAIN, device="gpu")
    x, y = torch.empty(4096, device="cuda"), torch.empty(4096, device="cuda")
    for seed in range(5):
        host = random_inputs(_func(CHAIN), seed=10 + seed)
        x.copy_(torch.from_numpy(host[0]))
        y.copy_(torch.from_numpy(host[1]))
        _close(model(x, y), _expected(CHAIN, host))
    runner = model.executor.graph
    assert runner.cache.captures <= 3  # the same inputs: outputs alternate at most


def test_loop_dropping_results_stops_capturing() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("cupy")
    import fusec

    model = fusec.compile(CHAIN, device="gpu")
    host = random_inputs(_func(CHAIN), seed=3)
    x, y = (torch.from_numpy(a).cuda() for a in host)
    for _ in range(5):
        model(x, y)
    captures = model.executor.graph.cache.captures
    for _ in range(50):
        y_out = model(x, y)
    assert model.executor.graph.cache.captures <= captures + 1
    _close(y_out, _expected(CHAIN, host))


def test_numpy_cupy_and_torch_inputs_mixed() -> None:
    torch = pytest.importorskip("torch")
    cupy = pytest.importorskip("cupy")
    import fusec

    model = fusec.compile(CHAIN, device="gpu")
    for seed in range(4):
        host = random_inputs(_func(CHAIN), seed=20 + seed)
        want = _expected(CHAIN, host)
        out_t = model(host[0], torch.from_numpy(host[1]).cuda())
        assert isinstance(out_t, torch.Tensor) and out_t.is_cuda
        out_c = model(cupy.asarray(host[0]), host[1])
        assert isinstance(out_c, cupy.ndarray)
        out_n = model(*host)
        assert isinstance(out_n, np.ndarray)
        _close(out_t, want)
        _close(cupy.asnumpy(out_c), want)
        _close(out_n, want)


@pytest.mark.parametrize("text", [MLP, GPT2_SMALL.read_text()], ids=["mlp", "gpt2"])
def test_library_gemms_are_captured(text: str, capfd: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("cupy")
    import fusec

    model = fusec.compile(text, device="gpu", gemm="library")
    plain = fusec.compile(text, device="gpu", gemm="library", graphs=False)
    assert any(la.library for la in model.signature.launches)
    for seed in range(4):
        host = random_inputs(_func(text), seed=seed)
        ins = [torch.from_numpy(a).cuda() for a in host]
        got, base = model(*ins), plain(*ins)
        torch.testing.assert_close(got, base, rtol=1e-4, atol=1e-4)
        _close(got, _expected(text, host), rel=5e-4)
    assert model.executor.graph is not None, capfd.readouterr().err
    assert "capture" not in capfd.readouterr().err
