"""The decomposition table the backend and the exporter use: PyTorch's core
ATen decompositions, plus scaled-dot-product attention as its math.

`F.scaled_dot_product_attention` would otherwise reach the graph as a fused
kernel chosen by device (flash or memory-efficient attention on CUDA), which
fusec cannot translate; written as matmuls and a softmax it becomes ops
fusec fuses. The math is PyTorch's own (`_scaled_dot_product_attention_math`
semantics): the scale, a boolean mask (False = masked) or an additive one,
`is_causal`, and rows that are masked entirely giving zeros (safe softmax,
where a mask is given: without one, or with only `is_causal`, no row can be
masked entirely and the softmax is the plain one).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx
from torch._decomp import core_aten_decompositions

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
    if is_causal:
        keep = torch.ones(length, source, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(keep.logical_not(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            scores = scores + attn_mask
    # Only a mask can take a whole row out (a causal one keeps key 0 in every
    # row): without one the guard for fully masked rows is dead code, and a
    # plain softmax is what the attention matcher fuses into one kernel.
    weights = aten._safe_softmax(scores, -1) if attn_mask is not None else scores.softmax(-1)
    return torch.matmul(weights, value)


def decompositions() -> dict[Any, Callable[..., Any]]:
    """Core ATen decompositions, with attention as math (for `torch.export`
    programs, which keep `aten.scaled_dot_product_attention` until decomposed)."""
    table = dict(core_aten_decompositions())
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
