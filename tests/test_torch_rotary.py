"""A Llama-style rotary embedding, the variance and the vector norm through
`torch.compile(backend="fusec")` in the simulator: no compute node is left
to PyTorch, and the outputs match eager PyTorch (fresh random inputs, tiny
shapes)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from fusec.dialects.element_types import element  # noqa: E402
from fusec.importers.torch import Backend, GraphReport  # noqa: E402


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Rotary(nn.Module):
    """Llama's rotary embedding: `cos`/`sin` of the positions times the
    inverse frequencies (an outer product, as a matmul), applied to q and k."""

    def __init__(self, dim: int, base: float = 10000.0) -> None:
        super().__init__()
        inv_freq = 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor, position_ids: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        freq = self.inv_freq[None, :, None].expand(position_ids.shape[0], -1, 1)
        freqs = (freq @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(q.dtype)[:, None], emb.sin().to(q.dtype)[:, None]
        return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


class Statistics(nn.Module):
    """`var` (with and without Bessel's correction) and vector norms."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x.var(dim=-1, keepdim=True), x.var(dim=(0, 1), correction=0), x.var(),
                torch.linalg.vector_norm(x, dim=-1),
                torch.linalg.vector_norm(x, ord=1, dim=(0, 2), keepdim=True),
                torch.linalg.vector_norm(x, ord=float("inf"), dim=1),
                torch.linalg.vector_norm(x, ord=3.0),
                torch.nn.functional.normalize(x, dim=-1))


def _compile(module: nn.Module, *inputs: torch.Tensor) -> tuple[tuple[torch.Tensor, ...],
                                                               GraphReport]:
    torch._dynamo.reset()
    backend = Backend()
    with torch.no_grad():
        out = torch.compile(module, backend=backend)(*inputs)
    (report,) = backend.reports
    assert report.compute_fallbacks == [], report.remarks
    assert len(report.fusec_partitions) == 1, report.remarks
    return out, report


def _assert_close(got: tuple[torch.Tensor, ...], want: tuple[torch.Tensor, ...],
                  dtype: str) -> None:
    """Within the dtype's tolerance, relative to max |eager| (at least 1)."""
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        a, b = g.float().numpy(), w.float().numpy()
        scale = max(float(np.abs(b).max()), 1.0)
        assert float(np.abs(a - b).max()) <= element(dtype).tolerance * scale


DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_rotary_embedding_runs_in_fusec(dtype: str) -> None:
    """Positions past 1000 (a long context): angles of hundreds of radians."""
    torch.manual_seed(31)
    if dtype == "bf16":
        pytest.importorskip("ml_dtypes")
    q, k = (torch.randn(2, 2, 5, 8, dtype=DTYPES[dtype]) for _ in range(2))
    position_ids = torch.randint(0, 2048, (2, 5))
    module = Rotary(8).eval()
    out, report = _compile(module, q, k, position_ids)
    assert {"cos", "sin"} <= set(report.fused_nodes)
    with torch.no_grad():
        _assert_close(out, module(q, k, position_ids), dtype)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_variance_and_norms_run_in_fusec(dtype: str) -> None:
    torch.manual_seed(32)
    if dtype == "bf16":
        pytest.importorskip("ml_dtypes")
    x = torch.randn(3, 4, 8, dtype=DTYPES[dtype])
    out, report = _compile(Statistics(), x)
    assert any(n.startswith("var") for n in report.fused_nodes)
    assert any(n.startswith("linalg_vector_norm") for n in report.fused_nodes)
    with torch.no_grad():
        _assert_close(out, Statistics()(x), dtype)


def test_variance_of_too_few_elements_is_inf_as_in_pytorch() -> None:
    """`correction` at least the count: PyTorch divides by zero (inf, and
    NaN for a zero sum); so does fusec."""
    x = torch.randn(2, 3)
    x[1] = 1.0  # a row of equal values: 0 / 0

    class Var(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.var(dim=1, correction=3)

    out, _ = _compile(Var(), x)
    with pytest.warns(UserWarning, match="degrees of freedom"):
        want = Var()(x)
    np.testing.assert_array_equal(out.numpy(), want.numpy())
