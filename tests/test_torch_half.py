"""bf16 and f16 modules through `torch.compile(backend="fusec")`, in the
simulator: nothing but glue is left to PyTorch, and the outputs match eager
PyTorch in the same dtype within the dtype's tolerance (fresh random inputs,
tiny shapes).

Glue is what `partition.is_glue` names: `getitem` (picking an output of a
multi-output op) and PyTorch's views (view, reshape of a contiguous tensor
through `_unsafe_view`, unsqueeze, squeeze, permute, transpose, t, expand,
slice, select, alias, detach); `GraphReport.compute_fallbacks` is every other
node PyTorch runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ml_dtypes")  # bf16 values in translation (docs/pytorch.md)
nn = torch.nn
F = torch.nn.functional

from fusec.dialects.element_types import element  # noqa: E402
from fusec.importers.torch import Backend, GraphReport  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}


class Attention(nn.Module):
    """`F.scaled_dot_product_attention`, optionally causal, optionally with
    fewer key/value heads than query heads (grouped-query attention)."""

    def __init__(self, causal: bool, gqa: bool = False) -> None:
        super().__init__()
        self.causal, self.gqa = causal, gqa

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal,
                                              enable_gqa=self.gqa)


class RMSNorm(nn.Module):
    """A Llama RMSNorm: f32 weight, computed in f32, rounded to the input's type."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.rand(dim) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return (self.weight * h).to(x.dtype)


class LlamaMLP(nn.Module):
    """RMSNorm + SwiGLU with a residual, as a Llama block writes it, with
    every weight kept in f32 and cast to the activations' type where used."""

    def __init__(self, dim: int = 8, hidden: int = 16) -> None:
        super().__init__()
        self.norm = RMSNorm(dim)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    @staticmethod
    def _linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, layer.weight.to(x.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        swiglu = F.silu(self._linear(self.gate, h)) * self._linear(self.up, h)
        return x + self._linear(self.down, swiglu)


def _mlp(dtype: torch.dtype) -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(dtype)


def _conv_block(dtype: torch.dtype) -> nn.Module:
    """Conv2d in `dtype`; batch norm's parameters and statistics stay f32
    (mixed precision, as cuDNN and autocast run it)."""
    block = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.MaxPool2d(2))
    bn = block[1]
    bn.running_mean.uniform_(-0.5, 0.5)
    bn.running_var.uniform_(0.5, 1.5)
    bn.weight.data.uniform_(0.5, 1.5)
    block[0].to(dtype)
    return block


def _layer_norm(dtype: torch.dtype) -> nn.Module:
    """f32 weight and bias, `dtype` activations."""
    norm = nn.LayerNorm(8)
    norm.weight.data.uniform_(0.5, 1.5)
    norm.bias.data.uniform_(-0.5, 0.5)
    return norm


def _qkv(heads: int, kv_heads: int) -> Callable[[torch.dtype], tuple[torch.Tensor, ...]]:
    def make(dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        return (torch.randn(1, heads, 5, 8, dtype=dtype),
                *(torch.randn(1, kv_heads, 5, 8, dtype=dtype) for _ in range(2)))

    return make


def _x(*shape: int) -> Callable[[torch.dtype], tuple[torch.Tensor, ...]]:
    return lambda dtype: (torch.randn(*shape, dtype=dtype),)


CASES: dict[str, tuple[Callable[[torch.dtype], nn.Module],
                       Callable[[torch.dtype], tuple[torch.Tensor, ...]]]] = {
    "mlp": (_mlp, _x(3, 8)),
    "conv_block": (_conv_block, _x(1, 3, 6, 6)),
    "layer_norm": (_layer_norm, _x(2, 3, 8)),
    "attention": (lambda _: Attention(causal=False), _qkv(2, 2)),
    "attention_causal": (lambda _: Attention(causal=True), _qkv(2, 2)),
    "attention_gqa": (lambda _: Attention(causal=True, gqa=True), _qkv(4, 2)),
    "rmsnorm_swiglu": (lambda _: LlamaMLP(), _x(2, 3, 8)),
}


def _compile(module: nn.Module, inputs: tuple[torch.Tensor, ...]
             ) -> tuple[torch.Tensor, GraphReport]:
    torch._dynamo.reset()
    backend = Backend()
    with torch.no_grad():
        out = torch.compile(module, backend=backend)(*inputs)
    (report,) = backend.reports
    return out, report


def _assert_close(out: torch.Tensor, expected: torch.Tensor, name: str) -> None:
    """Within the dtype's tolerance (element_types), relative to max |eager|."""
    assert out.dtype == expected.dtype
    got, want = out.float().numpy(), expected.float().numpy()
    bound = element(name).tolerance * float(np.abs(want).max())
    assert float(np.abs(got - want).max()) <= bound


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", list(CASES))
def test_half_module_runs_in_fusec(case: str, dtype: str) -> None:
    build, make_inputs = CASES[case]
    torch.manual_seed(sum(map(ord, case + dtype)))
    module, inputs = build(DTYPES[dtype]).eval(), make_inputs(DTYPES[dtype])
    out, report = _compile(module, inputs)
    assert report.compute_fallbacks == [], report.remarks
    assert len(report.fusec_partitions) == 1
    assert report.remarks[-1] == report.summary()
    assert report.summary().startswith(
        f"graph: {len(report.fused_nodes)} nodes fused in 1 partition(s)")
    with torch.no_grad():
        expected = module(*inputs)
    _assert_close(out, expected, dtype)


class RunningSum(nn.Module):
    """A `cumprod` (fusec has no scan) between bf16 ops."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(x * 2.0, dim=-1).to(x.dtype) * x + 1.0


def test_a_missing_op_is_named_with_its_reason_and_in_the_summary(
        capfd: pytest.CaptureFixture[str]) -> None:
    torch.manual_seed(21)
    x = torch.randn(3, 8, dtype=torch.bfloat16)
    torch._dynamo.reset()
    backend = Backend(remarks=True)
    with torch.no_grad():
        out = torch.compile(RunningSum(), backend=backend)(x)
    (report,) = backend.reports
    assert report.compute_fallbacks == ["cumprod"]
    summary = report.summary()
    assert summary.endswith("1 left to PyTorch (0 glue): cumprod")
    err = capfd.readouterr().err
    assert "fallback: node 'cumprod' (aten.cumprod.default)" in err
    assert "fusec has no translation for aten.cumprod.default" in err
    assert f"fusec: {summary}\n" in err
    _assert_close(out, RunningSum()(x), "bf16")


class PoolIndices(nn.Module):
    """Max pooling whose indices are used: the pooling stays in PyTorch and
    the `getitem`s that pick its outputs are glue."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled, indices = F.max_pool2d(x, 2, return_indices=True)
        return pooled * 2.0 + indices.to(x.dtype) * 0.125


def test_getitems_of_a_pytorch_node_are_glue() -> None:
    torch.manual_seed(22)
    x = torch.randn(1, 2, 4, 4, dtype=torch.bfloat16)
    out, report = _compile(PoolIndices(), (x,))
    assert report.compute_fallbacks == ["max_pool2d_with_indices"]
    assert sorted(report.glue) == ["getitem", "getitem_1"]
    assert "(2 glue): max_pool2d_with_indices" in report.summary()
    _assert_close(out, PoolIndices()(x), "bf16")


def _tensor_constant(x: torch.Tensor) -> torch.Tensor:
    return x * torch.tensor(2.5) + 1.0


def _mask_logic(x: torch.Tensor) -> torch.Tensor:
    keep = ((x > -0.5) & (x < 0.5)) | ~(x > 1.0) ^ (x < -1.5)
    return torch.where(keep, x, x * 0.25)


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GPT-2's `gelu_new`, written out."""
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
    return 0.5 * x * (1.0 + torch.tanh(inner))


@pytest.mark.parametrize("fn", [_tensor_constant, _mask_logic, _gelu_tanh],
                         ids=lambda f: f.__name__)
def test_bf16_functions_leave_nothing_to_pytorch(fn: Callable[[torch.Tensor], torch.Tensor]
                                                 ) -> None:
    """A tensor constant in the code (`torch.tensor(2.5)`), boolean mask
    algebra (`&`, `|`, `^`, `~`) and a written-out GELU, in bf16."""
    torch.manual_seed(23)
    x = torch.randn(4, 6, dtype=torch.bfloat16)
    out, report = _compile(fn, (x,))  # type: ignore[arg-type]
    assert report.fallback_nodes == [], report.remarks
    _assert_close(out, fn(x), "bf16")


def test_autocast_mixes_f32_layer_norm_weights_with_bf16_activations() -> None:
    """Under `torch.autocast`, the Linear layers run in bf16 and the layer
    norm takes bf16 activations with its f32 weight and bias."""
    torch.manual_seed(24)
    module = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16),
                           nn.Linear(16, 4)).eval()
    x = torch.randn(2, 8)
    torch._dynamo.reset()
    backend = Backend()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = torch.compile(module, backend=backend)(x)
        expected = module(x)
    (report,) = backend.reports
    assert report.fallback_nodes == [], report.remarks
    _assert_close(out, expected, "bf16")
