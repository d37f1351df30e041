"""The decomposition table the backend and the exporter use: PyTorch's core
ATen decompositions, plus scaled-dot-product attention as its math.

`F.scaled_dot_product_attention` would otherwise reach the graph as a fused
kernel chosen by device (flash or memory-efficient attention on CUDA), which
fusec cannot translate; written as matmuls and a softmax it becomes ops
fusec fuses. The math is PyTorch's own (`_scaled_dot_product_attention_math`
semantics): the scale, a boolean mask (False = masked) or an additive one,
`is_causal`, and rows that are masked entirely giving zeros (as PyTorch's
safe softmax does, decided from the mask rather than from the scores: the
same for finite queries and keys, and the softmax stays a plain one).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx
from torch._decomp import core_aten_decompositions, get_decompositions

aten = torch.ops.aten


def _sdpa_math(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
               attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0,
               is_causal: bool = False, scale: float | None = None,
               enable_gqa: bool = False) -> torch.Tensor:
    if dropout_p != 0.0:
        return NotImplemented  # training-time dropout: left to PyTorch
    if enable_gqa and key.shape[-3] != query.shape[-3]:
        repeat = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(repeat, dim=-3)
        value = value.repeat_interleave(repeat, dim=-3)
    factor = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    scores = torch.matmul(query, key.transpose(-2, -1)) * factor
    length, source = query.shape[-2], key.shape[-2]
    keep: torch.Tensor | None = None  # the keys each query row may see
    if is_causal:
        keep = torch.ones(length, source, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(keep.logical_not(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
            seen = attn_mask
        else:
            scores = scores + attn_mask
            seen = attn_mask != float("-inf")
        keep = seen if keep is None else keep & seen
    out = torch.matmul(scores.softmax(-1), value)
    if attn_mask is None:
        return out  # a causal mask keeps key 0 in every row: no row is masked entirely
    # A row the mask takes out entirely gives zeros (PyTorch's safe softmax).
    # Decided from the mask alone, after P V, the softmax and both matmuls
    # stay one attention; a constant mask (a causal one built from `arange`)
    # folds this to a condition true everywhere, and the select goes away.
    return torch.where(keep.any(-1, keepdim=True), out, out.new_zeros(()))


EXTRA_DECOMPOSED = [aten.native_group_norm, aten._native_batch_norm_legit.no_stats, aten.leaky_relu,
                    aten.elu, aten.repeat]
"""Ops core ATen keeps whole whose PyTorch decompositions are ops fusec
translates: group norm and instance norm (batch norm with the statistics
of the input: a mean and a variance per group or channel), leaky ReLU and
ELU (selects), `repeat` (a broadcast and a reshape)."""


def _even_window(x: torch.Tensor, output_size: Any) -> tuple[int, int] | None:
    """The pooling window of an adaptive pool whose output size divides the
    input's (every window the same), else None."""
    (h, w), (oh, ow) = x.shape[-2:], tuple(output_size)
    if oh <= 0 or ow <= 0 or h % oh or w % ow:
        return None
    return h // oh, w // ow


def _adaptive_avg_pool2d(x: torch.Tensor, output_size: Any) -> Any:
    window = _even_window(x, output_size)
    if window is None:
        return NotImplemented  # uneven windows: left to PyTorch, one op
    return F.avg_pool2d(x, window, window)


def _adaptive_max_pool2d(x: torch.Tensor, output_size: Any) -> Any:
    window = _even_window(x, output_size)
    if window is None:
        return NotImplemented
    return aten.max_pool2d_with_indices.default(x, list(window), list(window))


def _encoder_layer(src: torch.Tensor, embed_dim: int, num_heads: int,
                   qkv_weight: torch.Tensor, qkv_bias: torch.Tensor,
                   proj_weight: torch.Tensor, proj_bias: torch.Tensor, use_gelu: bool,
                   norm_first: bool, eps: float, norm_weight_1: torch.Tensor,
                   norm_bias_1: torch.Tensor, norm_weight_2: torch.Tensor,
                   norm_bias_2: torch.Tensor, ffn_weight_1: torch.Tensor,
                   ffn_bias_1: torch.Tensor, ffn_weight_2: torch.Tensor,
                   ffn_bias_2: torch.Tensor, mask: torch.Tensor | None = None,
                   mask_type: int | None = None) -> Any:
    """`nn.TransformerEncoderLayer`'s inference fast path (what eval mode
    under `no_grad` runs, batch first) as its math, PyTorch's
    `transformer_encoder_layer_forward`: self-attention with a residual,
    then the feed-forward block with a residual, each normalised before
    (`norm_first`) or after. A mask (padding or attention) is left to
    PyTorch's kernel."""
    if mask is not None or src.dim() != 3:
        return NotImplemented
    batch, length, _ = src.shape
    head = embed_dim // num_heads

    def norm(t: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(t, (embed_dim,), weight, bias, eps)

    def attention(t: torch.Tensor) -> torch.Tensor:
        q, k, v = (p.reshape(batch, length, num_heads, head).transpose(1, 2)
                   for p in F.linear(t, qkv_weight, qkv_bias).chunk(3, dim=-1))
        heads = _sdpa_math(q, k, v).transpose(1, 2).reshape(batch, length, embed_dim)
        return F.linear(heads, proj_weight, proj_bias)

    def feed_forward(t: torch.Tensor) -> torch.Tensor:
        hidden = F.linear(t, ffn_weight_1, ffn_bias_1)
        hidden = F.gelu(hidden) if use_gelu else F.relu(hidden)
        return F.linear(hidden, ffn_weight_2, ffn_bias_2)

    if norm_first:
        x = src + attention(norm(src, norm_weight_1, norm_bias_1))
        return x + feed_forward(norm(x, norm_weight_2, norm_bias_2))
    x = norm(src + attention(src), norm_weight_1, norm_bias_1)
    return norm(x + feed_forward(x), norm_weight_2, norm_bias_2)


def _var_mean(x: torch.Tensor, dim: Any = None, *, correction: Any = None,
              keepdim: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    dims = list(range(x.dim())) if dim is None else dim
    return (torch.var(x, dims, correction=correction, keepdim=keepdim),
            torch.mean(x, dims, keepdim=keepdim))


def _mean(x: torch.Tensor, *, dtype: Any = None) -> torch.Tensor:
    return torch.mean(x, list(range(x.dim())), dtype=dtype)


def decompositions() -> dict[Any, Callable[..., Any]]:
    """Core ATen decompositions, with attention as math (for `torch.export`
    programs, which keep `aten.scaled_dot_product_attention` until decomposed)."""
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(EXTRA_DECOMPOSED))
    table[aten.var_mean.correction] = _var_mean
    table[aten.mean.default] = _mean
    table[aten._adaptive_avg_pool2d.default] = _adaptive_avg_pool2d
    table[aten._transformer_encoder_layer_fwd.default] = _encoder_layer
    table[aten.adaptive_max_pool2d.default] = _adaptive_max_pool2d
    table[aten.scaled_dot_product_attention.default] = _sdpa_math
    return table


def attention_as_math(gm: fx.GraphModule) -> int:
    """Make the calls of `F.scaled_dot_product_attention` in a Dynamo graph
    call the math above, before aot_autograd traces it (aot_autograd picks a
    device kernel for it otherwise); returns how many were replaced."""
    count = 0
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is F.scaled_dot_product_attention:
            node.target = _sdpa_math
            count += 1
    if count:
        gm.recompile()
    return count
