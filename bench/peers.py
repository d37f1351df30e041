"""The benchmark peers: each model of bench/models written in PyTorch, op for
op as in the `.mlir` file, plus the bytes and flops its floor is made of.

Only the benchmark suite imports this (PyTorch is an optional extra)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

Tensor = torch.Tensor


def chain16(x: Tensor) -> Tensor:
    for _ in range(16):
        x = x * 1.001
        x = x + 0.001
    return x


def softmax(x: Tensor) -> Tensor:
    m = x.amax(dim=1, keepdim=True)
    e = torch.exp(x - m)
    return e / e.sum(dim=1, keepdim=True)


def add_layernorm_gelu(a: Tensor, residual: Tensor, gamma: Tensor, beta: Tensor) -> Tensor:
    h = F.layer_norm(a + residual, (a.shape[-1],), gamma, beta, 1e-5)
    return F.gelu(h)


def mlp(x: Tensor, w: Tensor, bias: Tensor) -> Tensor:
    return F.gelu(x @ w + bias)


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    s = (q @ k.transpose(-1, -2)) * 0.125 + mask
    return torch.softmax(s, dim=-1) @ v


def inverted_residual(x: Tensor, w_expand: Tensor, b_expand: Tensor, w_dw: Tensor,
                      b_dw: Tensor, w_proj: Tensor, b_proj: Tensor) -> Tensor:
    h = torch.clamp(F.conv2d(x, w_expand) + b_expand, 0.0, 6.0)
    h = torch.clamp(F.conv2d(h, w_dw, padding=1, groups=w_dw.shape[0]) + b_dw, 0.0, 6.0)
    return F.conv2d(h, w_proj) + b_proj + x


def gpt2_block(x: Tensor, causal_mask: Tensor, ln1_g: Tensor, ln1_b: Tensor, w_qkv: Tensor,
               b_qkv: Tensor, w_out: Tensor, b_out: Tensor, ln2_g: Tensor, ln2_b: Tensor,
               w_fc: Tensor, b_fc: Tensor, w_proj: Tensor, b_proj: Tensor) -> Tensor:
    b, s, d = x.shape
    h = F.layer_norm(x, (d,), ln1_g, ln1_b, 1e-5)
    qkv = h @ w_qkv + b_qkv
    q, k, v = (qkv[..., i * d:(i + 1) * d].reshape(b, s, d // 64, 64).transpose(1, 2)
               for i in range(3))
    att = torch.softmax((q @ k.transpose(-1, -2)) * 0.125 + causal_mask, dim=-1) @ v
    h = att.transpose(1, 2).reshape(b, s, d) @ w_out + b_out + x
    m = F.layer_norm(h, (d,), ln2_g, ln2_b, 1e-5)
    m = F.gelu(m @ w_fc + b_fc, approximate="tanh")
    return m @ w_proj + b_proj + h


def column_sum(x: Tensor) -> Tensor:
    return x.sum(dim=0, keepdim=True)


def attention_sdpa(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    """The attention row as PyTorch's fused kernel (FlashAttention-style in
    f16/bf16; memory-efficient attention in f32 with an additive mask)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.125)


PEERS: dict[str, Callable[..., Any]] = {
    "chain16": chain16,
    "softmax": softmax,
    "add_layernorm_gelu": add_layernorm_gelu,
    "mlp": mlp,
    "attention": attention,
    "inverted_residual": inverted_residual,
    "gpt2_block": gpt2_block,
    "column_sum": column_sum,
    "column_sum_narrow": column_sum,
}


# Library kernels timed beside torch eager and torch.compile in a row
# (`bench/run_gpu.py`): name -> {column: function of the row's inputs}.
LIBRARY_PEERS: dict[str, dict[str, Callable[..., Any]]] = {
    "attention": {"F.sdpa": attention_sdpa},
}


def floor_work(name: str, inputs: list[Tensor], output: Tensor) -> tuple[int, float]:
    """(bytes that must move, flops that must run) for the model's floor:
    every input read once and the output written once; contractions' flops."""
    moved = sum(t.numel() * t.element_size() for t in inputs)
    moved += output.numel() * output.element_size()
    flops = 0.0
    if name == "mlp":
        m, k = inputs[0].shape
        flops = 2.0 * m * k * inputs[1].shape[1]
    elif name == "attention":
        b, h, s, d = inputs[0].shape
        flops = 2 * (2.0 * b * h * s * s * d)
    elif name == "gpt2_block":
        b, s, d = inputs[0].shape
        tokens = b * s
        flops = 2.0 * tokens * d * (3 * d + d + 4 * d + 4 * d) + 2 * 2.0 * b * 12 * s * s * 64
    elif name == "inverted_residual":
        n, c, hh, ww = inputs[0].shape
        e = inputs[1].shape[0]
        flops = 2.0 * n * hh * ww * (c * e + e * 9 + e * c)
    return moved, flops if flops else math.nan
