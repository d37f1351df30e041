"""cuDNN's fused attention as an attention group's backend: which attentions
it takes, where their operands lie, and what it costs.

`fuse-attention` offers an attention to the library when cuDNN's attention
can run here (`analysis/cudnn_library.sdpa_available`) and the attention is
one it computes exactly (`library_problem` says why not otherwise):

- f16 or bf16 operands, head dims equal, a multiple of 8 and at most 128;
- scores that are `Q Kᵀ` times a constant (a splat `nn.mul` or `nn.div`, or
  none; a half type's f32 scale with its casts to f32 and back, which round
  nothing in cuDNN's f32 scores; a scale of Q or K that `fuse-attention`
  moved onto the scores), with at most a causal mask (query i sees keys
  0..i: a constant `nn.select` of the scores and -inf, or a constant 0 /
  -inf `nn.add`; what `fold-constants` leaves of PyTorch's `is_causal` and
  of a causal mask built in the graph); any other mask or score op stays
  with fusec's kernel;
- Q, K, V and the output each a strided view `[batch, heads, tokens, dim]`
  of one buffer with the head dim contiguous, K and V broadcast at most
  over the innermost heads (grouped-query attention: cuDNN reads K/V head
  `h // G` for query head `h`, in place, with no repeated copy): a head
  sliced out of a packed QKV projection and an output written straight into
  `[batch, tokens, heads * dim]` are read and written in place
  (`LibraryAttention`: offsets, dims and strides per tensor).

Its time (`library_time`) is the FLOPs at `Target.library_attention_rate`,
never below the DRAM time of Q, K, V and O; where it beats both the fused
kernel and the three-kernel path, the group is marked `backend =
"library"` and code generation writes a plan launch
(`codegen/library_attention.py`) that the runtime runs through cuDNN
(`runtime/cudnn_sdpa.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise
from math import prod

import numpy as np
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue

from fusec.analysis.attention_pattern import HALF_OR_F32, AttentionPattern
from fusec.analysis.computed_values import computed_value
from fusec.analysis.diagnostics import op_error
from fusec.analysis.group_body import GroupBody
from fusec.analysis.strided_view import StridedView
from fusec.analysis.targets import Target
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp
from fusec.dialects.nn_base import (
    element_type,
    element_type_name,
    tensor_shape,
)
from fusec.scheduling.attention_group import find_pattern
from fusec.scheduling.attention_schedule import AttentionShape

BACKEND_MODES = ("auto", "library", "fused")
"""`fuse-attention{backend=...}` (`fusec --attention`): cuDNN where it is
estimated faster, cuDNN wherever it takes the attention, never cuDNN."""
ELEMENTS = ("f16", "bf16")
"""Operand types cuDNN's fused attention takes (f32 math inside)."""
MAX_HEAD_DIM = 128
INT32_LIMIT = 1 << 31  # cuDNN's strides and our offsets stay within int32
CAUSAL_ATTR = "causal"
"""The attention group attribute (`"true"`) by which `fuse-attention`
records that the group's mask is causal: found where the mask's values were
known (before grouping put the ops that compute them in kernels of their
own); the library call masks by it, and reads no mask."""
MASK_REFUSAL = "the scores are masked (not by a causal mask)"
"""Why cuDNN's attention does not take a mask (`library_attention`)."""
MASKED = -9.0e3
"""A mask value at or below this takes its key out (exp of it and less is 0
in f32 beside any score): -inf, a type's lowest value, BERT's -10000 (which
bf16 rounds to -9984)."""


@dataclass(frozen=True)
class Placed:
    """Where one tensor of the attention lies in its buffer: the element
    offset and the dims and strides of `[batch, heads, tokens, dim]`."""

    offset: int
    dims: tuple[int, int, int, int]
    strides: tuple[int, int, int, int]

    def json(self) -> dict[str, object]:
        return {"offset": self.offset, "dims": list(self.dims), "strides": list(self.strides)}


@dataclass(frozen=True)
class LibraryAttention:
    """An attention cuDNN computes: its element type, scale and tensors."""

    element: str
    scale: float
    causal: bool  # query i sees keys 0..i (top-left aligned)
    q: Placed
    k: Placed
    v: Placed
    o: Placed
    bias: Placed | None = None  # added to the scaled scores (a padding mask)


def _constant(v: SSAValue, outer: dict[BlockArgument, SSAValue]) -> float | None:
    """The value of splat `v`, or None."""
    values = computed_value(v, outer)
    if values is None or values.size == 0 or not bool(np.all(values == values.flat[0])):
        return None
    return float(values.flat[0])


def _causal(keep: np.ndarray | None, scores: tuple[int, ...]) -> bool:
    """Whether `keep` (which keys each query sees, broadcast to `scores`)
    is the causal mask aligned at the top left: query i sees keys 0..i, as
    PyTorch's `is_causal` and cuDNN's `use_causal_mask` have it."""
    if keep is None or keep.ndim > len(scores) or keep.shape[-2:] != scores[-2:]:
        return False
    tril = np.tril(np.ones(scores[-2:], dtype=bool))
    return bool(np.all(keep.reshape(-1, *scores[-2:]) == tril))


def _scores(p: AttentionPattern, outer: dict[BlockArgument, SSAValue], causal_known: bool
            ) -> tuple[float, bool, SSAValue | None] | str:
    """The factor of the scores, whether a causal mask takes the keys after
    each query (`causal_known`: the one mask is causal, whatever computes
    it) and the value added to the scaled scores where that is a tensor of
    the program's (a padding mask: `Q Kᵀ * scale + bias`, read from memory),
    or why the scores are something else."""
    scale, causal, v = 1.0, False, p.qk.result
    bias: SSAValue | None = None
    shape = tensor_shape(p.qk.result)
    for op in p.score_ops:
        if isinstance(op, nn.MulOp | nn.DivOp) and v in op.operands and \
                (isinstance(op, nn.MulOp) or op.operands[0] is v):
            other = op.operands[1] if op.operands[0] is v else op.operands[0]
            c = _constant(other, outer)
            if c is None or c == 0.0:
                return f"the scores are scaled by {op.name} of a tensor, not a constant"
            if bias is not None:  # cuDNN adds its bias to the scaled scores
                return "the scores are scaled after the mask is added"
            scale = scale * c if isinstance(op, nn.MulOp) else scale / c
        elif isinstance(op, nn.SelectOp) and not causal and v in (op.on_true, op.on_false):
            kept = op.on_true is v
            fill = _constant(op.on_false if kept else op.on_true, outer)
            cond = computed_value(op.cond, outer)
            keep = None if cond is None else (cond.astype(bool) if kept else ~cond.astype(bool))
            if fill is None or fill > MASKED or not (causal_known or _causal(keep, shape)):
                return MASK_REFUSAL
            causal = True
        elif isinstance(op, nn.AddOp) and not causal and bias is None and v in op.operands:
            other = op.operands[1] if op.operands[0] is v else op.operands[0]
            added = computed_value(other, outer)
            if added is None and not causal_known:
                problem = _bias_problem(p, other, outer)
                if problem is not None:
                    return problem
                bias = other
            elif not causal_known and (added is None or not _causal(added > MASKED, shape) or
                                       bool(np.any(added[added > MASKED] != 0))):
                return MASK_REFUSAL
            else:
                causal = True
        elif isinstance(op, nn.AddOp) and v in op.operands:
            # a relative position bias and a shifted window's mask (Swin)
            return "the scores are masked twice (cuDNN adds one mask)"
        elif isinstance(op, nn.CastOp) and _float_cast(op):
            # widened to f32 for a scale and rounded back (`q * 0.17` in bf16,
            # moved onto the scores): cuDNN, as fusec's kernel, keeps them in f32
            pass
        else:
            return f"the scores go through {op.name}"
        v = op.results[0]
    if bias is not None and causal:
        return "the scores are masked twice (a causal mask and a mask tensor)"
    return scale, causal, bias


def _float_cast(op: nn.CastOp) -> bool:
    """Whether `op` casts between the attention's float types (f16, bf16, f32)."""
    return all(element_type_name(element_type(v)) in HALF_OR_F32 for v in (op.x, op.result))


def _bias_problem(p: AttentionPattern, value: SSAValue,
                  outer: dict[BlockArgument, SSAValue]) -> str | None:
    """Why cuDNN cannot read `value`, added to the scores, as its bias
    tensor (it must be a tensor of the attention's type that the group reads
    from memory, broadcast at most over batches, heads and queries), or None."""
    if element_type_name(element_type(value)) != element_type_name(element_type(p.qk.lhs)):
        return "the mask added to the scores is not of the attention's type"
    shape, scores = tensor_shape(value), tensor_shape(p.qk.result)
    if not shape or shape[-1] != scores[-1]:
        return "the mask added to the scores is not one value per key"
    return None


def _batch_axes(views: dict[str, StridedView]) -> dict[str, list[tuple[int, int]]] | str:
    """Each view's batch axes as (extent, stride), over the axes where Q's
    extent is not 1: an axis a view has once where Q has it `n` times
    (K and V read alike by every query head of a group) is `(n, 0)`."""
    extents = views["q"].shape[:-2]
    axes: dict[str, list[tuple[int, int]]] = {}
    for w, view in views.items():
        if len(view.shape) != len(extents) + 2:
            return "its operands have different batch ranks"
        axes[w] = []
        for n, (m, s) in zip(extents, zip(view.shape[:-2], view.strides[:-2], strict=True),
                             strict=True):
            if m != n and m != 1:
                return "its operands broadcast over heads"
            if n != 1:
                axes[w].append((n, s if m == n else 0))
    return axes


def _one_axis(axes: list[tuple[int, int]], span: int) -> tuple[int, int] | None:
    """`axes` merged into one (extent, stride), or None where they do not
    lie one inside the other; no axis is an axis of one (stride `span`)."""
    if not axes:
        return (1, span)
    if any(s0 != s1 * n1 for (_, s0), (n1, s1) in pairwise(axes)):
        return None
    return (prod(n for n, _ in axes), axes[-1][1])


def _split(axes: dict[str, list[tuple[int, int]]]
           ) -> dict[str, tuple[list[tuple[int, int]], list[tuple[int, int]]]] | str:
    """Each view's batch axes split into those of its batch and of its
    heads. Where K and V are broadcast (grouped-query attention: `G` query
    heads read one K/V head), the broadcast axes must be the innermost and
    alike in K and V: Q's and O's heads are the K/V heads times `G`, and
    query head `h` reads K/V head `h // G`, as cuDNN's attention has it."""
    shared = {w: [s == 0 for _, s in a] for w, a in axes.items()}
    if any(shared["q"]) or any(shared["o"]):
        return "Q or its output is broadcast"
    if any(shared["k"]) or any(shared["v"]):
        if shared["k"] != shared["v"]:
            return "K and V are broadcast over different axes"
        first = shared["k"].index(True)
        if not all(shared["k"][first:]):
            return "K and V are broadcast over an axis other than the innermost heads"
        at = max(first - 1, 0)
        return {w: (a[:at], a[at:] if w in ("q", "o") else a[at:first]) for w, a in axes.items()}
    # no broadcast: the innermost axes that merge in every view are the heads
    rank = len(axes["q"])
    for at in range(max(rank - 1, 0), -1, -1):
        parts = {w: (a[:at], a[at:]) for w, a in axes.items()}
        if all(_one_axis(part, 1) is not None for p in parts.values() for part in p):
            return parts
    return "its batch axes do not collapse to batch and heads"


def _placed(views: dict[str, StridedView], bias: StridedView | None = None
            ) -> dict[str, Placed] | str:
    """The four views as `[batch, heads, tokens, dim]`, their batch axes
    merged alike (K and V with fewer heads under grouped-query attention),
    and the `bias` added to the scores (its view at their shape) as
    `[batch, heads, queries, keys]`; or why they cannot be."""
    axes = _batch_axes(views)
    if isinstance(axes, str):
        return axes
    split = _split(axes)
    if isinstance(split, str):
        return split
    placed: dict[str, Placed] = {}
    for w, view in views.items():
        span = max([view.strides[-2] * view.shape[-2], *(s * n for n, s in axes[w])])
        batch, heads = (_one_axis(part, span) for part in split[w])
        if batch is None or heads is None:
            return "its batch axes do not collapse to batch and heads"
        if view.strides[-1] != 1:
            return f"the head dim of {w} is not contiguous"
        dims = (batch[0], heads[0], view.shape[-2], view.shape[-1])
        strides = (batch[1], heads[1], view.strides[-2], 1)
        if max([view.offset, *strides]) >= INT32_LIMIT:
            return "an operand is too large for cuDNN's 32-bit strides"
        placed[w] = Placed(view.offset, dims, strides)
    if bias is not None:
        found = _placed_bias(views["q"], bias, len(split["q"][0]))
        if isinstance(found, str):
            return found
        placed["bias"] = found
    return placed


def _placed_bias(q: StridedView, bias: StridedView, at: int) -> Placed | str:
    """The bias (`bias`: its view at the scores' shape, stride 0 where it
    broadcasts) as `[batch, heads, queries, keys]`, its batch axes split as
    Q's are at `at`, or why it cannot be."""
    axes = _batch_axes({"q": q, "bias": bias})
    if isinstance(axes, str):
        return axes
    span = max([bias.strides[-2] * bias.shape[-2], *(s * n for n, s in axes["bias"])])
    batch, heads = _one_axis(axes["bias"][:at], span), _one_axis(axes["bias"][at:], span)
    if batch is None or heads is None:
        return "the mask added to the scores does not collapse to batch and heads"
    if bias.strides[-1] != 1:
        return "the mask added to the scores is broadcast over keys"
    dims = (batch[0], heads[0], bias.shape[-2], bias.shape[-1])
    strides = (batch[1], heads[1], bias.strides[-2], 1)
    if max([bias.offset, *strides]) >= INT32_LIMIT:
        return "the mask is too large for cuDNN's 32-bit strides"
    return Placed(bias.offset, dims, strides)


def bias_ops(p: AttentionPattern, bias: SSAValue) -> list[Operation]:
    """The side ops of `p` that compute `bias` (the mask cuDNN adds to the
    scores): on the library backend they stay outside the group, whose
    call reads the bias from memory."""
    side, found = set(p.side_ops), []
    pending = [bias]
    while pending:
        v = pending.pop()
        if isinstance(v, OpResult) and v.op in side and v.op not in found:
            found.append(v.op)
            pending.extend(v.op.operands)
    return found


def mask_select(p: AttentionPattern) -> tuple[nn.SelectOp, SSAValue] | None:
    """The select that masks the scores by a boolean mask of the program's
    with -inf (a padding mask: `where(mask, scores, -inf)`, as Hugging Face
    models write it), which cuDNN takes once it is written as a bias added
    to the scores (`scores + where(mask, 0, -inf)`: the same numbers for
    finite scores, -inf staying -inf; a finite fill would not be, on a row
    masked whole), and the scores it keeps; None when there is none."""
    v = p.qk.result
    for op in p.score_ops:
        if isinstance(op, nn.SelectOp) and v in (op.on_true, op.on_false):
            fill = _constant(op.on_false if op.on_true is v else op.on_true, {})
            if fill == -math.inf and computed_value(op.cond, {}) is None and \
                    tensor_shape(op.cond)[-1:] == tensor_shape(v)[-1:]:
                return op, v
        v = op.results[0]
    return None


def scores_bias(p: AttentionPattern) -> SSAValue | None:
    """The mask tensor added to `p`'s scores that cuDNN reads as its bias,
    or None."""
    found = _scores(p, {}, False)
    return None if isinstance(found, str) else found[2]


def _broadcast_view(shape: tuple[int, ...], to: tuple[int, ...]) -> StridedView:
    """A contiguous value of `shape` read at the broadcast shape `to`:
    stride 0 along the axes it has once (or not at all)."""
    own = StridedView.contiguous(shape).strides
    lead = len(to) - len(shape)
    return StridedView(to, (*([0] * lead), *(0 if n == 1 and m != 1 else s for n, m, s in
                                              zip(shape, to[lead:], own, strict=True))))


def library_attention(p: AttentionPattern, outer: dict[BlockArgument, SSAValue],
                      causal_known: bool = False) -> LibraryAttention | str:
    """What cuDNN computes for pattern `p` (`outer`: the values outside a
    group that its inputs stand for; `causal_known`: its mask was found
    causal, `CAUSAL_ATTR`), or why it cannot."""
    element = element_type_name(element_type(p.qk.lhs))
    if element not in ELEMENTS or element_type_name(element_type(p.pv.result)) != element:
        return f"cuDNN's attention takes f16 or bf16, not {element}"
    q_view, kt_view = p.source_view("q"), p.source_view("k")
    d, dv = q_view.shape[-1], p.source_view("v").shape[-1]
    if d != dv or d % 8 or d > MAX_HEAD_DIM:
        return f"head dims {d} and {dv} (cuDNN: equal, multiples of 8, at most {MAX_HEAD_DIM})"
    scores = _scores(p, outer, causal_known)
    if isinstance(scores, str):
        return scores
    scale, causal, bias = scores
    k_view = kt_view.transpose([*range(len(kt_view.shape) - 2), len(kt_view.shape) - 1,
                                len(kt_view.shape) - 2])
    bias_view = None if bias is None else _broadcast_view(tensor_shape(bias),
                                                          tensor_shape(p.qk.result))
    placed = _placed({"q": q_view, "k": k_view, "v": p.source_view("v"),
                      "o": p.output_view()}, bias_view)
    if isinstance(placed, str):
        return placed
    return LibraryAttention(element, scale, causal, placed["q"], placed["k"], placed["v"],
                            placed["o"], placed.get("bias"))


def library_time(shape: AttentionShape, target: Target, causal: bool = False) -> float:
    """Seconds of cuDNN's fused attention: its FLOPs at the target's rate
    (half of them under a causal mask, whose masked tiles it skips), never
    below the DRAM time of Q, K, V and O, plus a launch."""
    flops = 2 * shape.heads * shape.s * shape.skv * (shape.d + shape.dv) / (2 if causal else 1)
    io = shape.heads * (shape.s * (shape.d + shape.dv) + shape.skv * (shape.d + shape.dv))
    return max(flops / target.library_attention_rate(), io * shape.item /
               target.memory_bandwidth) + target.launch_overhead


@dataclass(frozen=True)
class LibraryAttentionPlan:
    """The detail plan of an attention group on the library backend: what
    cuDNN computes and the group's values holding Q, K and V (outside the
    group: what the launch names)."""

    attention: LibraryAttention
    sources: dict[str, SSAValue]  # "q", "k", "v" and, with a bias, "bias"


def plan_library_attention(group: GroupOp, body: GroupOp, target: Target
                           ) -> LibraryAttentionPlan:
    """The plan of library attention `group`, whose (decomposed) body is
    `body`; an attention cuDNN cannot compute is an error at the group."""
    pattern = find_pattern(GroupBody.of(body))
    outer = {a: group.inputs[i] for i, a in enumerate(body.block.args)}
    found = library_attention(pattern, outer,
                              group.attributes.get(CAUSAL_ATTR) == StringAttr("true"))
    if isinstance(found, str):
        raise op_error(group, f"cuDNN's attention cannot compute this attention group: {found}")
    sources = {}
    for which in ("q", "k", "v"):
        source = pattern.source(which)
        assert isinstance(source, BlockArgument)  # find_pattern checked it
        sources[which] = group.inputs[source.index]
    if found.bias is not None:
        scores = _scores(pattern, outer, False)
        assert not isinstance(scores, str) and scores[2] is not None  # as library_attention found
        if not isinstance(bias := scores[2], BlockArgument):
            raise op_error(group, "cuDNN's attention cannot compute this attention group: its "
                           "mask is computed inside the group")
        sources["bias"] = group.inputs[bias.index]
    return LibraryAttentionPlan(found, sources)
