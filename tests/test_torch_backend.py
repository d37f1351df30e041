"""`torch.compile(model, backend="fusec")` on a corpus of small modules, in the
simulator, against eager PyTorch (fresh random inputs, tiny shapes)."""

from __future__ import annotations

import functools
import logging
import tomllib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from fusec.analysis.diagnostics import FusecError  # noqa: E402
from fusec.importers.torch import Backend, fusec_backend, reports  # noqa: E402
from fusec.importers.torch.backend import Fallback  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _register() -> None:
    """The entry point registers "fusec" in an installed fusec; a source tree
    on PYTHONPATH registers the same function by hand."""
    from torch._dynamo import list_backends, register_backend

    if "fusec" not in list_backends(exclude_tags=()):
        register_backend(fusec_backend, name="fusec")


class Attention(nn.Module):
    """`F.scaled_dot_product_attention` with a boolean, a float or a causal mask."""

    def __init__(self, mask: str) -> None:
        super().__init__()
        self.mask = mask

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        s = q.shape[-2]
        if self.mask == "causal":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if self.mask == "bool":
            keep = torch.ones(s, s, dtype=torch.bool).tril()
            return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        if self.mask == "float":
            bias = torch.arange(s, dtype=torch.float32).reshape(1, s) * -0.25
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return F.scaled_dot_product_attention(q, k, v)


class Cumulative(nn.Module):
    """A Linear, `cumprod` (which fusec lacks), then more fusec ops."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(torch.cumprod(torch.relu(self.proj(x)), dim=-1)) * 2.0


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4), nn.Sigmoid())


def _conv_block() -> nn.Module:
    block = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU6(),
                          nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    bn = block[1]
    bn.running_mean.uniform_(-0.5, 0.5)  # non-trivial statistics
    bn.running_var.uniform_(0.5, 1.5)
    return block


class Statistics(nn.Module):
    """`torch.var_mean` over two dims, and the mean of everything (`x.mean()`)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        var, mean = torch.var_mean(x, dim=(1, 2), keepdim=True)
        return (x - mean) / (var + 1e-5).sqrt() + x.mean()


class Repeat(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.repeat(2, 1, 3) * 2.0


class AdaptivePools(nn.Module):
    """Adaptive average and max pools whose output sizes divide the input's."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.adaptive_avg_pool2d(x, (2, 3)) + F.adaptive_max_pool2d(x, (2, 1))


def _eval_stats(block: nn.Sequential) -> nn.Sequential:
    """`block` with non-trivial running statistics in its batch norms."""
    for m in block:
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    return block


def _qkv() -> tuple[torch.Tensor, ...]:
    return tuple(torch.randn(1, 2, 4, 8) for _ in range(3))


CORPUS: dict[str, tuple[Callable[[], nn.Module], Callable[[], tuple[torch.Tensor, ...]]]] = {
    "mlp": (_mlp, lambda: (torch.randn(2, 8),)),
    "conv_bn": (_conv_block, lambda: (torch.randn(1, 3, 6, 6),)),
    "attention": (lambda: Attention("none"), _qkv),
    "attention_bool_mask": (lambda: Attention("bool"), _qkv),
    "attention_float_mask": (lambda: Attention("float"), _qkv),
    "attention_causal": (lambda: Attention("causal"), _qkv),
    "layer_norm": (lambda: nn.LayerNorm(8), lambda: (torch.randn(2, 3, 8),)),
    "group_norm": (lambda: nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.GroupNorm(2, 8),
                                         nn.SiLU()), lambda: (torch.randn(2, 4, 6, 6),)),
    "instance_norm": (lambda: nn.Sequential(nn.Conv2d(3, 4, 3), nn.InstanceNorm2d(4, affine=True),
                                            nn.ReLU()), lambda: (torch.randn(2, 3, 7, 7),)),
    "leaky_relu": (lambda: nn.Sequential(nn.Linear(8, 8), nn.LeakyReLU(0.1)),
                   lambda: (torch.randn(2, 8),)),
    "statistics": (Statistics, lambda: (torch.randn(2, 3, 4, 5),)),
    "adaptive_pools": (AdaptivePools, lambda: (torch.randn(2, 3, 4, 6),)),
    "repeat": (lambda: Repeat(), lambda: (torch.randn(2, 3),)),
    "conv1d_bn1d": (lambda: _eval_stats(nn.Sequential(
        nn.Conv1d(4, 8, 3, padding=1, stride=2), nn.BatchNorm1d(8), nn.GELU(),
        nn.Conv1d(8, 8, 5, padding=4, dilation=2, groups=8, bias=False))),
        lambda: (torch.randn(2, 4, 17),)),
    "linear_bn1d": (lambda: _eval_stats(nn.Sequential(nn.Linear(8, 6), nn.BatchNorm1d(6),
                                                      nn.ReLU())), lambda: (torch.randn(5, 8),)),
}


def _run(module: nn.Module, inputs: tuple[torch.Tensor, ...], **options: object
         ) -> tuple[torch.Tensor, Backend]:
    torch._dynamo.reset()
    backend = Backend(**options)
    with torch.no_grad():
        out = torch.compile(module, backend=backend)(*inputs)
    return out, backend


@pytest.mark.parametrize("name", list(CORPUS))
def test_corpus_matches_eager(name: str) -> None:
    build, make_inputs = CORPUS[name]
    torch.manual_seed(sum(map(ord, name)))
    module, inputs = build().eval(), make_inputs()
    out, backend = _run(module, inputs)
    (report,) = backend.reports
    assert report.fallback_nodes == [], report.remarks
    assert len(report.fusec_partitions) == 1
    assert report.launches >= 1
    with torch.no_grad():
        expected = module(*inputs)
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-4, atol=1e-5)


def test_unsupported_op_falls_back_to_pytorch(caplog: pytest.LogCaptureFixture) -> None:
    torch.manual_seed(3)
    module, x = Cumulative().eval(), torch.randn(2, 8)
    with caplog.at_level(logging.INFO, logger="fusec.torch"):
        out, backend = _run(module, (x,))
    (report,) = backend.reports
    assert report.fallback_nodes == ["cumprod"]
    assert len(report.fusec_partitions) == 2  # before and after the cumprod
    # The report itself says what PyTorch runs and why, beside the remarks.
    assert report.fallbacks == {"cumprod": Fallback(
        "aten.cumprod.default", "fusec has no translation for aten.cumprod.default")}
    assert report.fallbacks_by_op() == [
        ("aten.cumprod.default", 1, "fusec has no translation for aten.cumprod.default")]
    assert any("fallback: node 'cumprod' (aten.cumprod.default)" in r.message
               for r in caplog.records)
    with torch.no_grad():
        np.testing.assert_allclose(out.numpy(), module(x).numpy(), rtol=1e-4, atol=1e-5)


def test_options_pass_through_to_fusec() -> None:
    torch.manual_seed(4)
    module, x = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh()), \
        torch.randn(2, 8)
    fused, on = _run(module, (x,))
    unfused, off = _run(module, (x,), fusion=False)
    assert off.reports[0].launches > on.reports[0].launches
    np.testing.assert_allclose(fused.numpy(), unfused.numpy(), rtol=1e-5, atol=1e-6)


def test_unknown_option_is_refused() -> None:
    with pytest.raises(FusecError, match="unknown fusec backend option 'tile'"):
        Backend(tile=4)


def test_backend_by_name_and_its_reports() -> None:
    _register()
    torch.manual_seed(5)
    torch._dynamo.reset()
    module, x = nn.Sequential(nn.Linear(4, 4), nn.SiLU()), torch.randn(3, 4)
    with torch.no_grad():
        out = torch.compile(module, backend="fusec", options={"remarks": False})(x)
        np.testing.assert_allclose(out.numpy(), module(x).numpy(), rtol=1e-4, atol=1e-5)
    assert reports()[-1].fusec_partitions[0].model is not None


def test_entry_point_names_the_backend() -> None:
    """pyproject.toml registers the backend function under "fusec"."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    target = meta["project"]["entry-points"]["torch_dynamo_backends"]["fusec"]
    module, _, attr = target.partition(":")
    assert module == fusec_backend.__module__ and attr == fusec_backend.__name__
    assert "fusec.importers.torch" in meta["tool"]["setuptools"]["packages"]


@pytest.mark.gpu
def test_cuda_tensors_through_the_backend() -> None:
    """On a GPU, CUDA tensors go in and come out (zero-copy on torch's stream)."""
    torch.manual_seed(6)
    module = CORPUS["attention_causal"][0]().cuda()
    inputs = tuple(t.cuda() for t in _qkv())
    out, backend = _run(module, inputs)
    assert out.is_cuda and backend.reports[0].fallback_nodes == []
    with torch.no_grad():
        np.testing.assert_allclose(out.cpu().numpy(), module(*inputs).cpu().numpy(),
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("allow", "options", "want"), [
    (True, {}, True), (False, {}, False), (True, {"conv_tf32": False}, False)])
def test_conv_tf32_follows_pytorch_unless_the_options_say(
        allow: bool, options: dict[str, object], want: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    import fusec.compiler.python_api as python_api

    seen: list[object] = []
    real = python_api.compile

    @functools.wraps(real)  # the backend checks options against its signature
    def spy(source: str, **kwargs: object) -> object:
        seen.append(kwargs.get("conv_tf32"))
        return real(source, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(python_api, "compile", spy)
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", allow)
    torch._dynamo.reset()
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU()).eval()
    x = torch.randn(1, 3, 6, 6)
    got = torch.compile(model, backend=Backend(**options))(x)
    torch.testing.assert_close(got, model(x), rtol=1e-4, atol=1e-4)
    assert seen == [want]


@pytest.mark.parametrize("mask", ["none", "causal"])
def test_attention_without_a_mask_is_one_kernel(mask: str) -> None:
    """Without a mask (or with `is_causal` alone) no row is masked entirely,
    so the softmax carries no guard and the attention fuses into one kernel."""
    torch.manual_seed(7)
    module, inputs = Attention(mask).eval(), _qkv()
    out, backend = _run(module, inputs)
    (report,) = backend.reports
    assert report.launches == 1, report.remarks
    with torch.no_grad():
        np.testing.assert_allclose(out.numpy(), module(*inputs).numpy(), rtol=1e-4, atol=1e-5)


class RowMasked(nn.Module):
    """Attention with a mask that takes query row 1 out entirely: a boolean
    mask given as an input, or a float one with -inf across the row."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                keep: torch.Tensor) -> torch.Tensor:
        if self.kind == "bool":
            return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        bias = torch.zeros(keep.shape).masked_fill(keep.logical_not(), float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_a_row_the_mask_takes_out_entirely_gives_zeros(kind: str) -> None:
    """As PyTorch's safe softmax: the row is zeros, the others match eager,
    whether the mask is an input (a select after the attention) or not."""
    torch.manual_seed(8)
    keep = torch.rand(4, 4) > 0.4
    keep[:, 0] = True
    keep[1] = False
    module, inputs = RowMasked(kind).eval(), (*_qkv(), keep)
    out, backend = _run(module, inputs)
    assert backend.reports[0].fallback_nodes == []
    with torch.no_grad():
        expected = module(*inputs)
    assert torch.equal(out[..., 1, :], torch.zeros_like(out[..., 1, :]))
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-4, atol=1e-5)


class HandWrittenAttention(nn.Module):
    """timm's attention block without `fused_attn`: a fused QKV projection
    unbound into Q, K and V, Q scaled, `q @ k.transpose(-2, -1)` on 4-D
    tensors (PyTorch's `bmm` form in the graph), optionally a learned bias
    on the scores, softmax, `@ v`, the output projection."""

    def __init__(self, dim: int, heads: int, bias_keys: int = 0) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.bias = nn.Parameter(0.1 * torch.randn(1, heads, bias_keys, bias_keys)) \
            if bias_keys else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        scores = (q * self.head_dim ** -0.5) @ k.transpose(-2, -1)
        if self.bias is not None:
            scores = scores + self.bias
        out = scores.softmax(dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, n, c))


@pytest.mark.parametrize(("batch", "bias"), [(2, False), (1, False), (3, True)])
def test_a_hand_written_attention_over_an_unbound_qkv_is_one_kernel(batch: int,
                                                                    bias: bool) -> None:
    """Projection, one attention kernel, projection: V's squeeze (`[1, B,
    H, S, D]` to `[B, H, S, D]`) once made `P V` a matmul of its own and
    the attention three kernels (7 launches); Q's scale was a kernel of its
    own before it moved onto the attention's scores (4 launches)."""
    torch.manual_seed(10 + batch)
    module, x = HandWrittenAttention(32, 4, 12 if bias else 0).eval(), torch.randn(batch, 12, 32)
    out, backend = _run(module, (x,))
    assert backend.reports[0].launches == 3, backend.reports[0].remarks
    with torch.no_grad():
        np.testing.assert_allclose(out.numpy(), module(x).numpy(), rtol=1e-4, atol=1e-5)


class ShiftedWindowAttention(HandWrittenAttention):
    """timm's Swin window attention without `fused_attn` on shifted windows:
    `HandWrittenAttention` over `B * nW` windows, a relative position bias,
    then the shift mask added per window through a split of the windows'
    batch axis (`view(B, nW, H, N, N) + mask.unsqueeze(1).unsqueeze(0)`) and
    merged back (`view(-1, H, N, N)`) before the softmax."""

    def __init__(self, dim: int, heads: int, windows: int, tokens: int) -> None:
        super().__init__(dim, heads, tokens)
        # 0 or -100 per (window, query, key), as Swin's shift mask
        self.register_buffer("mask", -100.0 * (torch.rand(windows, tokens, tokens) < 0.3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bw, n, c = x.shape
        qkv = self.qkv(x).reshape(bw, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        scores = (q * self.head_dim ** -0.5) @ k.transpose(-2, -1) + self.bias
        mask = self.mask
        assert isinstance(mask, torch.Tensor)
        windows = mask.shape[0]
        scores = scores.view(bw // windows, windows, self.heads, n, n) + \
            mask.unsqueeze(1).unsqueeze(0)
        out = scores.view(-1, self.heads, n, n).softmax(dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(bw, n, c))


@pytest.mark.parametrize("batch", [1, 2])
def test_a_shifted_window_attention_is_one_kernel(batch: int) -> None:
    """Projection, one attention kernel, projection: the scores, split to
    `[B, nW, H, N, N]` for the mask and merged back, once made the attention
    three kernels and a copy (Swin's shifted windows); Q's scale was a kernel
    of its own before it moved onto the attention's scores (4 launches)."""
    torch.manual_seed(20 + batch)
    module = ShiftedWindowAttention(32, 4, 4, 9).eval()
    x = torch.randn(batch * 4, 9, 32)
    out, backend = _run(module, (x,))
    assert backend.reports[0].launches == 3, backend.reports[0].remarks
    with torch.no_grad():
        np.testing.assert_allclose(out.numpy(), module(x).numpy(), rtol=1e-4, atol=1e-5)


def test_a_constant_causal_mask_leaves_one_attention_kernel() -> None:
    """A boolean causal mask built in the graph folds to a constant: the
    guard for fully masked rows is decided at compile time and goes away."""
    torch.manual_seed(9)
    module, inputs = Attention("bool").eval(), _qkv()
    out, backend = _run(module, inputs)
    assert backend.reports[0].launches == 1, backend.reports[0].remarks
    with torch.no_grad():
        np.testing.assert_allclose(out.numpy(), module(*inputs).numpy(), rtol=1e-4, atol=1e-5)


def test_an_uneven_adaptive_pool_is_one_node_in_pytorch() -> None:
    """Output sizes that do not divide the input's (windows of different
    sizes) keep the op whole: one fallback, not a decomposition's scattered
    index arithmetic."""
    x = torch.randn(2, 3, 5, 7)
    out, backend = _run(nn.Sequential(nn.AdaptiveAvgPool2d((2, 3)), nn.Tanh()), (x,))
    (report,) = backend.reports
    assert report.compute_fallbacks == ["_adaptive_avg_pool2d"]
    np.testing.assert_allclose(out.numpy(), torch.tanh(F.adaptive_avg_pool2d(x, (2, 3))).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_elu_runs_in_fusec() -> None:
    x = torch.randn(3, 16)
    out, backend = _run(nn.ELU(0.7), (x,))
    (report,) = backend.reports
    assert report.fallback_nodes == []
    np.testing.assert_allclose(out.numpy(), F.elu(x, 0.7).numpy(), rtol=1e-5, atol=1e-6)


def test_as_strided_of_a_contiguous_tensor_is_a_reshape_and_others_run_in_pytorch() -> None:
    x = torch.randn(4, 6)

    def dense(t: torch.Tensor) -> torch.Tensor:
        return torch.as_strided(t * 2.0, (5, 4), (4, 1), 3) + 1.0

    def strided(t: torch.Tensor) -> torch.Tensor:
        return torch.as_strided(t * 2.0, (3, 3), (1, 6)) + 1.0

    out, backend = _run(dense, (x,))
    assert backend.reports[0].fallback_nodes == []
    np.testing.assert_allclose(out.numpy(), dense(x).numpy(), rtol=1e-6)
    out, backend = _run(strided, (x,))
    assert backend.reports[0].compute_fallbacks == []  # a view left to PyTorch: glue
    assert "strides [1, 6] other than contiguous ones" in backend.reports[0].fallbacks[
        "as_strided"].reason
    np.testing.assert_allclose(out.numpy(), strided(x).numpy(), rtol=1e-6)


@pytest.mark.parametrize("pad", [(1, 2), (0, 3, 2, 0), (1, -2, -1, 1), (2, 2, 1, 1, 1, 0)])
def test_constant_pad_runs_in_fusec(pad: tuple[int, ...]) -> None:
    x = torch.randn(2, 3, 4, 5)

    def fn(t: torch.Tensor) -> torch.Tensor:
        return F.pad(torch.tanh(t), pad, value=0.5) * 2.0

    out, backend = _run(fn, (x,))
    assert backend.reports[0].fallback_nodes == [], backend.reports[0].remarks
    np.testing.assert_allclose(out.numpy(), fn(x).numpy(), rtol=1e-6, atol=1e-7)


INDEXING: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "columns": lambda x, i: torch.tanh(x[:, i]) + 1.0,
    "rows_2d_index": lambda x, i: x[i.reshape(2, -1)] * 2.0,
    "index_select": lambda x, i: torch.index_select(x * 3.0, 1, i.abs()),
}


@pytest.mark.parametrize("name", list(INDEXING))
def test_indexing_by_one_integer_tensor_is_a_gather(name: str) -> None:
    torch.manual_seed(sum(map(ord, name)))
    x = torch.randn(7, 7)
    i = torch.tensor([3, -1, 0, 6, 2, 2])  # a negative index counts from the end
    out, backend = _run(INDEXING[name], (x, i))
    assert backend.reports[0].fallback_nodes == [], backend.reports[0].remarks
    np.testing.assert_allclose(out.numpy(), INDEXING[name](x, i).numpy(), rtol=1e-6, atol=1e-7)


def test_index_tensors_each_varying_along_its_own_dimension_are_gathers() -> None:
    """A padding mask expanded to (B, 1, 1, K) by broadcast arange index
    tensors (Hugging Face's attention masks) is two gathers and a reshape;
    index tensors out of order still fall back, with the reason."""
    mask = torch.randn(3, 9) > 0
    b, k = torch.tensor([2, 0, 1]), torch.tensor([8, 0, 3, 3, -1])

    def fn(m: torch.Tensor, bi: torch.Tensor, ki: torch.Tensor) -> torch.Tensor:
        picked = m[bi[:, None, None, None], ki[None, None, None, :]]
        return torch.where(picked, 0.0, -1e4) + ki.float()

    def crossed(t: torch.Tensor, bi: torch.Tensor, ki: torch.Tensor) -> torch.Tensor:
        return t[bi[None, :], ki[:, None]] * 2.0

    out, backend = _run(fn, (mask, b, k))
    assert backend.reports[0].fallback_nodes == [], backend.reports[0].remarks
    np.testing.assert_array_equal(out.numpy(), fn(mask, b, k).numpy())
    x = torch.randn(3, 9)
    out, backend = _run(crossed, (x, b, k))
    assert backend.reports[0].fallback_nodes == ["index"]
    assert "in the order of the indexed dimensions" in backend.reports[0].fallbacks["index"].reason
    np.testing.assert_allclose(out.numpy(), crossed(x, b, k).numpy(), rtol=1e-6)


GATHERS: dict[str, tuple[Callable[..., torch.Tensor], tuple[int, ...], int, tuple[int, ...]]] = {
    # name: (fn, input shape, dim, index shape)
    "position_ids": (lambda x, i: torch.gather(x.expand(1, -1), 1, i) * 2, (11,), 1, (1, 6)),
    "labels": (lambda x, i: torch.gather(torch.log_softmax(x, -1), -1, i).sum(), (4, 5, 7), 2,
               (4, 5, 1)),
    "dim0": (lambda x, i: torch.gather(torch.tanh(x), 0, i), (6, 5), 0, (3, 4)),
    "middle": (lambda x, i: torch.gather(x + 1.0, 1, i), (2, 7, 3), 1, (2, 9, 2)),
}


@pytest.mark.parametrize("name", list(GATHERS))
def test_torch_gather_is_one_gather_from_the_flattened_input(name: str) -> None:
    fn, shape, dim, index_shape = GATHERS[name]
    torch.manual_seed(sum(map(ord, name)))
    x = torch.randn(*shape)
    i = torch.randint(0, shape[dim] if len(shape) > 1 or dim == 0 else shape[0], index_shape)
    out, backend = _run(fn, (x, i))
    assert backend.reports[0].fallback_nodes == [], backend.reports[0].remarks
    assert len(backend.reports[0].fusec_partitions) == 1
    np.testing.assert_allclose(out.numpy(), fn(x, i).numpy(), rtol=1e-5, atol=1e-6)


def test_max_and_min_values_and_indices_run_in_fusec() -> None:
    x = torch.randn(4, 9)

    def values(t: torch.Tensor) -> torch.Tensor:
        return t.max(dim=1).values + t.min(dim=0, keepdim=True).values.sum() + t.max() - t.min()

    def indices(t: torch.Tensor) -> torch.Tensor:
        return t.max(dim=1).indices.float() + torch.tanh(t).sum(1)

    for fn in (values, indices):
        out, backend = _run(fn, (x,))
        assert backend.reports[0].fallback_nodes == [], backend.reports[0].remarks
        np.testing.assert_allclose(out.numpy(), fn(x).numpy(), rtol=1e-6, atol=1e-6)


ARG_REDUCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "argmax_last": lambda t: torch.argmax(t * 2.0, dim=-1),
    "argmin_first_keepdim": lambda t: torch.argmin(torch.relu(t), dim=0, keepdim=True),
    "argmax_whole": lambda t: torch.argmax(t),
    "argmax_whole_keepdim": lambda t: torch.argmax(t, keepdim=True),
    "max_dim_pair": lambda t: torch.stack([t.max(dim=1).values, t.max(dim=1).indices.float()]),
    "min_dim_keepdim": lambda t: t.min(dim=2, keepdim=True).indices,
    "argmax_bool": lambda t: torch.argmax((t > 0.5).int(), dim=1),
    "max_bool_dim": lambda t: (t > 0).max(dim=2).values,
}


@pytest.mark.parametrize("name", list(ARG_REDUCTIONS))
def test_argmax_and_argmin_pick_the_first_extreme_nan_included(name: str) -> None:
    """The first index that reaches the extreme, as PyTorch's: ties (the
    ReLU's zeros, rounded halves) and NaN, which counts as the extreme."""
    fn = ARG_REDUCTIONS[name]
    torch.manual_seed(sum(map(ord, name)))
    x = torch.round(torch.randn(3, 6, 5) * 2) / 2  # many ties
    x[1, 2, 3] = float("nan")
    x[2, 4, 0] = float("nan")
    x[2, 1, 0] = float("nan")
    out, backend = _run(fn, (x,))
    assert backend.reports[0].fallback_nodes == [], backend.reports[0].remarks
    expected = fn(x)
    assert out.dtype == expected.dtype and out.shape == expected.shape
    np.testing.assert_array_equal(out.numpy(), expected.numpy())


def test_nearest_upsampling_is_two_gathers() -> None:
    x = torch.randn(2, 3, 4, 5)

    def fn(t: torch.Tensor) -> torch.Tensor:
        up = F.interpolate(torch.relu(t), scale_factor=2, mode="nearest")
        return up[..., :7] + F.interpolate(t, size=(8, 7), mode="nearest")

    def picked(t: torch.Tensor, r: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return t[:, :, r[:, None], c] * 2.0

    out, backend = _run(fn, (x,))
    assert backend.reports[0].fallback_nodes == [], backend.reports[0].remarks
    np.testing.assert_allclose(out.numpy(), fn(x).numpy(), rtol=1e-6, atol=1e-7)
    r, c = torch.tensor([3, 0, -1]), torch.tensor([4, 4, 1, 0])
    out, backend = _run(picked, (x, r, c))
    assert backend.reports[0].fallback_nodes == [], backend.reports[0].remarks
    np.testing.assert_allclose(out.numpy(), picked(x, r, c).numpy(), rtol=1e-6)


def test_slice_assignment_copy_and_tensor_clamp_run_in_fusec() -> None:
    """In-place slice assignments (a Swin attention mask, a cache update)
    reach the backend as `slice_scatter` and `copy`; `clamp` with tensor
    bounds as max and min."""
    x, y = torch.randn(4, 6, 5), torch.randn(4, 2, 5)

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        m = torch.zeros(4, 6, 5)
        m[:, 1:3] = torch.tanh(b)
        m[:, 5:] = 2.0
        c = a.clone()
        c[:, :2] = b
        lo, hi = torch.full((5,), -0.5), torch.full((1, 5), 0.5)
        return m + c + torch.clamp(a, lo, hi) + torch.clamp(a, min=lo)

    out, backend = _run(fn, (x, y))
    assert backend.reports[0].fallback_nodes == [], backend.reports[0].remarks
    np.testing.assert_allclose(out.numpy(), fn(x, y).numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("norm_first", [False, True])
def test_a_transformer_encoder_layer_in_inference_runs_in_fusec(norm_first: bool) -> None:
    """Eval mode under `no_grad` takes PyTorch's fused fast path
    (`_transformer_encoder_layer_fwd`); it is decomposed into its math."""
    torch.manual_seed(14)
    layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, batch_first=True,
                                       activation="gelu", norm_first=norm_first).eval()
    x = torch.randn(2, 5, 16)
    out, backend = _run(layer, (x,))
    assert backend.reports[0].fallback_nodes == [], backend.reports[0].remarks
    with torch.no_grad():
        np.testing.assert_allclose(out.numpy(), layer(x).numpy(), rtol=1e-4, atol=1e-5)


def test_new_shapes_compile_a_graph_per_shape() -> None:
    """A second call with other shapes makes Dynamo trace with dynamic
    shapes (sizes as inputs); fusec compiles that graph once per set of
    concrete shapes, each matching eager, instead of failing."""
    torch.manual_seed(15)
    module = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16),
                           nn.LayerNorm(16)).eval()
    torch._dynamo.reset()
    backend = Backend()
    compiled = torch.compile(module, backend=backend)
    with torch.no_grad():
        for length in (8, 12, 10, 12):
            x = torch.randn(2, length, 16)
            np.testing.assert_allclose(compiled(x).numpy(), module(x).numpy(),
                                       rtol=1e-4, atol=1e-5)
    assert len(backend.reports) == 3  # 8 (static), then 12 and 10; 12 again reused
    assert all(r.fallback_nodes == [] for r in backend.reports), backend.reports[-1].remarks

    def fn(t: torch.Tensor) -> torch.Tensor:
        return torch.softmax(t.reshape(t.shape[0], -1) * 2.0, -1)

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend, dynamic=True)
    for n in (4, 6):
        x = torch.randn(3, n, 5)
        np.testing.assert_allclose(compiled(x).numpy(), fn(x).numpy(), rtol=1e-5, atol=1e-7)
    assert backend.reports[-1].fallback_nodes == []


def test_dynamic_shapes_keep_at_most_a_few_compiled_sets(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """Ever new lengths do not pile up compiled programs: the least recently
    used set of shapes is dropped (and compiled again when it comes back)."""
    from fusec.importers.torch import backend as backend_module

    monkeypatch.setattr(backend_module._PerShape, "KEPT", 2)
    kept: list[backend_module._PerShape] = []
    real = backend_module._PerShape.__init__

    def spy(self: backend_module._PerShape, *args: object) -> None:
        real(self, *args)  # type: ignore[arg-type]
        kept.append(self)

    monkeypatch.setattr(backend_module._PerShape, "__init__", spy)

    def fn(t: torch.Tensor) -> torch.Tensor:
        return torch.tanh(t) * 2.0

    torch._dynamo.reset()
    backend = Backend()
    compiled = torch.compile(fn, backend=backend, dynamic=True)
    for n in (3, 4, 5, 3, 6, 4):
        x = torch.randn(2, n)
        np.testing.assert_allclose(compiled(x).numpy(), fn(x).numpy(), rtol=1e-6)
    (per_shape,) = kept
    shapes_kept = [next(k[0] for k in key if isinstance(k, tuple)) for key in per_shape.compiled]
    assert shapes_kept == [(2, 6), (2, 4)]
    # 3, 4, 5 compiled; 3 again evicted by then (kept: 4, 5); 3, 6 and 4 again
    assert len(backend.reports) == 6


def test_training_runs_the_forward_in_fusec_and_the_backward_in_pytorch(
        recwarn: pytest.WarningsRecorder) -> None:
    """Both compilers hand aot_autograd boxed functions (no warning), and the
    gradients are eager's."""
    torch.manual_seed(11)
    lin = nn.Linear(8, 4)
    x = torch.randn(3, 8, requires_grad=True)
    torch._dynamo.reset()
    out = torch.compile(lambda t: torch.tanh(lin(t)).sum(), backend=Backend())(x)
    out.backward()
    got = x.grad.clone()
    x.grad = None
    torch.tanh(lin(x)).sum().backward()
    np.testing.assert_allclose(got.numpy(), x.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert not [w for w in recwarn if "boxed" in str(w.message)]


CUMSUMS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "last_dim": lambda x, ids: torch.cumsum(torch.relu(x), -1) * 0.5,
    "middle_dim": lambda x, ids: torch.tanh(torch.cumsum(x, 1)),
    # RoBERTa's position ids: a mask's running count, as integers
    "position_ids": lambda x, ids: x[..., 0] + (
        torch.cumsum(ids.ne(1).int(), dim=1).type_as(ids) * ids.ne(1).int() + 1).float(),
    "bool_mask": lambda x, ids: torch.cumsum(x > 0, dim=-1).float() * x,
}


@pytest.mark.parametrize("name", list(CUMSUMS))
def test_cumsum_is_a_product_with_a_triangle_of_ones(name: str) -> None:
    torch.manual_seed(sum(map(ord, name)))
    x = torch.randn(3, 7, 5)
    ids = torch.randint(0, 4, (3, 7))
    out, backend = _run(CUMSUMS[name], (x, ids))
    assert backend.reports[0].fallback_nodes == [], backend.reports[0].remarks
    expected = CUMSUMS[name](x, ids)
    assert out.dtype == expected.dtype
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)


def test_cumsum_of_other_integers_or_too_long_stays_in_pytorch() -> None:
    def counts(ids: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(ids, -1) * 2  # any integers: float32 sums could round

    ids = torch.randint(-5, 5, (2, 6))
    out, backend = _run(counts, (ids,))
    assert backend.reports[0].fallbacks["cumsum"].reason == \
        "cumsum of integers is supported for 0/1 values (a mask) only"
    np.testing.assert_array_equal(out.numpy(), counts(ids).numpy())
    x = torch.randn(2, 1025)
    out, backend = _run(lambda t: torch.cumsum(t, -1) + 1.0, (x,))
    assert "more than 1024 elements" in backend.reports[0].fallbacks["cumsum"].reason
