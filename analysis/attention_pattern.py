"""Recognising attention: `softmax(f(Q @ Kᵀ)) @ V`, with `f` a chain of
elementwise ops (scale, additive or select mask), the softmax whole or
decomposed, and the transposes/reshapes/slices of multi-head layouts around
the three operands and the output.

```mlir
%kt = nn.transpose %k {perm = [0, 1, 3, 2]} : (...) -> tensor<2x3x16x40xf32>
%s = nn.matmul %q, %kt : (...) -> tensor<2x3x40x40xf32>        // qk
%x = nn.add %s, %mask : (tensor<2x3x40x40xf32>, tensor<40x40xf32>) -> ...   // score op
%m = nn.reduce_max %x {axes = [3], keepdims = true} ...         // softmax ops
...
%p = nn.div %e, %l : ...
%o = nn.matmul %p, %v : (...) -> tensor<2x3x40x16xf32>         // pv
```

`match_attention(op, names)` starts at a softmax result (an `nn.softmax` or
the `nn.div` of a decomposed one) and returns the `AttentionPattern`, a
`Refusal` with a readable reason, or None when the softmax does not feed a
matmul at all. The same matcher reads a function body (`fuse-attention`)
and a group body (the emitter, `codegen/attention.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.ir import Operation, OpResult, SSAValue

from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.analysis.strided_view import VIEW_OPS, StridedView, backward, forward
from fusec.dialects import nn
from fusec.dialects.nn_base import dense_to_numpy, element_type, element_type_name, tensor_shape
from fusec.dialects.shapes import fmt

# How far back a score op's operand is searched for the QK matmul.
MAX_SCORE_DEPTH = 8
# Side computations (mask algebra) folded into the kernel, at most this deep.
MAX_SIDE_DEPTH = 4

Namer = Callable[[Operation], str]
# Operand types the fused kernel reads (widened to f32 as they are staged).
HALF_OR_F32 = ("f32", "f16", "bf16")


@dataclass(frozen=True)
class Refusal:
    """Why an attention pattern is not fused, at `op`."""

    op: Operation
    reason: str


@dataclass
class AttentionPattern:
    """The ops of one attention and how its operands are read."""

    qk: nn.MatmulOp
    pv: nn.MatmulOp
    scores: SSAValue  # the softmax input: f(Q @ Kᵀ)
    score_ops: list[Operation]  # the elementwise chain from qk to `scores`
    side_ops: list[Operation]  # elementwise ops and splat constants computing masks
    softmax_ops: list[Operation]
    views: dict[str, list[Operation]] = field(default_factory=dict[str, list[Operation]])
    """"q", "k", "v": layout ops from the source to the matmul operand, in
    order; "out": layout ops from pv's result to the output, in order."""

    @property
    def output(self) -> SSAValue:
        """The value the fused kernel writes."""
        out = self.views.get("out", [])
        return out[-1].results[0] if out else self.pv.result

    def source(self, which: str) -> SSAValue:
        """The value `which` ("q", "k", "v") is read from."""
        chain = self.views.get(which, [])
        if chain:
            return chain[0].operands[0]
        return {"q": self.qk.lhs, "k": self.qk.rhs, "v": self.pv.rhs}[which]

    def ops(self) -> list[Operation]:
        """Every op of the pattern (constants included), unordered."""
        return [*self.side_ops, *(op for c in self.views.values() for op in c), self.qk,
                *self.score_ops, *self.softmax_ops, self.pv]

    def source_view(self, which: str) -> StridedView:
        """Where `which`'s matmul operand lies in its source (contiguous)."""
        view: StridedView | None = StridedView.contiguous(tensor_shape(self.source(which)))
        for op in self.views.get(which, []):
            assert view is not None
            view = forward(view, op)
        assert view is not None
        return view

    def output_view(self) -> StridedView:
        """Where pv's result lies in the (contiguous) output."""
        view: StridedView | None = StridedView.contiguous(tensor_shape(self.output))
        for op in reversed(self.views.get("out", [])):
            assert view is not None
            view = backward(view, op)
        assert view is not None
        return view


def _owner(v: SSAValue) -> Operation | None:
    return v.op if isinstance(v, OpResult) else None


def _users(v: SSAValue) -> list[Operation]:
    return list(dict.fromkeys(u.operation for u in v.uses))


def _last_axis(op: Operation) -> bool:
    rank = len(tensor_shape(op.operands[0]))
    return isinstance(op, nn.ReduceOp) and op.axes == (rank - 1,) and op.keepdims


def _softmax(op: Operation) -> tuple[SSAValue, list[Operation], list[SSAValue]] | None:
    """(input, ops, values that must stay inside) of a softmax ending at `op`."""
    if isinstance(op, nn.SoftmaxOp):
        return op.x, [op], []
    if not isinstance(op, nn.DivOp):
        return None
    e, total = op.lhs, op.rhs
    exp, red = _owner(e), _owner(total)
    if not isinstance(exp, nn.ExpOp) or not isinstance(red, nn.ReduceSumOp) or red.x is not e:
        return None
    ops: list[Operation] = [exp, red, op]
    inner = [e, total]
    x = exp.x
    sub = _owner(x)
    if isinstance(sub, nn.SubOp) and isinstance(mx := _owner(sub.rhs), nn.ReduceMaxOp) \
            and mx.x is sub.lhs:
        ops[:0] = [mx, sub]
        inner += [sub.rhs, x]
        x = sub.lhs
        if not _last_axis(mx):
            return x, ops, inner  # refused by the caller (axis check)
    return x, ops, inner


def match_attention(op: Operation, describe: Namer) -> AttentionPattern | Refusal | None:
    """The attention whose softmax ends at `op` (see the module docstring)."""
    soft = _softmax(op)
    if soft is None:
        return None
    x, softmax_ops, inner = soft
    probs = op.results[0]
    pvs = [u for u in _users(probs) if isinstance(u, nn.MatmulOp) and u.lhs is probs]
    if not pvs or _find_qk(x) is None:
        return None
    pv = pvs[0]
    return _Matcher(describe, pv).run(x, softmax_ops, inner, probs)


def _find_qk(v: SSAValue, depth: int = 0) -> nn.MatmulOp | None:
    owner = _owner(v)
    if isinstance(owner, nn.MatmulOp):
        return owner
    if owner is None or op_kind(owner) is not OpKind.ELEMENTWISE or depth >= MAX_SCORE_DEPTH:
        return None
    found = [m for o in owner.operands if (m := _find_qk(o, depth + 1)) is not None]
    return found[0] if found else None


@dataclass
class _Matcher:
    describe: Namer
    pv: nn.MatmulOp

    def refuse(self, reason: str) -> Refusal:
        return Refusal(self.pv, reason)

    def run(self, x: SSAValue, softmax_ops: list[Operation], inner: list[SSAValue],
            probs: SSAValue) -> AttentionPattern | Refusal:
        pv = self.pv
        last = len(tensor_shape(x)) - 1
        if (isinstance(softmax_ops[0], nn.SoftmaxOp) and softmax_ops[0].axis != last) or \
                any(isinstance(o, nn.ReduceOp) and not _last_axis(o) for o in softmax_ops):
            return self.refuse("the softmax is not taken over the key axis (the last one)")
        chain = self._score_chain(x)
        if isinstance(chain, Refusal):
            return chain
        qk, score_ops = chain
        members = {qk, *score_ops, *softmax_ops, pv}
        for v in [qk.result, *(o.results[0] for o in score_ops), *inner, probs]:
            others = [u for u in _users(v) if u not in members]
            if others:
                return self.refuse(f"the scores {self._name(v)} are also read by "
                                   f"{self.describe(others[0])}, so they would have to be "
                                   "written to memory")
        shape = tensor_shape(qk.result)
        for o in score_ops:
            if tensor_shape(o.results[0]) != shape:
                return self.refuse(
                    f"the mask of {self.describe(o)} broadcasts the {fmt(shape)} scores to "
                    f"{fmt(tensor_shape(o.results[0]))}; the mask must broadcast to the scores")
        if tensor_shape(pv.result)[:-2] != shape[:-2]:
            return self.refuse(f"the value operand broadcasts the {fmt(shape[:-2])} heads to "
                               f"{fmt(tensor_shape(pv.result)[:-2])}")
        for v in (qk.lhs, qk.rhs, pv.rhs, qk.result):
            if (t := element_type_name(element_type(v))) not in HALF_OR_F32:
                return self.refuse("attention is fused in f32, f16 or bf16 (f32 math) only; "
                                   f"this one computes in {t}")
        side = self._side_ops(score_ops, members)
        pattern = AttentionPattern(qk, pv, x, score_ops, side, softmax_ops)
        for which, value in (("q", qk.lhs), ("k", qk.rhs), ("v", pv.rhs)):
            pattern.views[which] = _operand_views(value)
        pattern.views["out"] = _output_views(pv.result)
        return pattern

    def _name(self, v: SSAValue) -> str:
        owner = _owner(v)
        return self.describe(owner) if owner is not None else "value"

    def _score_chain(self, x: SSAValue) -> tuple[nn.MatmulOp, list[Operation]] | Refusal:
        """The QK matmul and the elementwise ops from it to `x`, in order."""
        chain: list[Operation] = []
        v = x
        while not isinstance(owner := _owner(v), nn.MatmulOp):
            assert owner is not None
            on_path = [o for o in owner.operands if _find_qk(o) is not None]
            if len(on_path) != 1 or len(set(on_path)) != len(on_path):
                return self.refuse(f"{self.describe(owner)} reads the scores more than once")
            chain.insert(0, owner)
            v = on_path[0]
        return owner, chain

    def _side_ops(self, score_ops: list[Operation], members: set[Operation]) -> list[Operation]:
        """Splat constants and single-use elementwise ops feeding the score
        chain only (mask algebra such as `select(cmp(i, j), ...)`): computed
        in the kernel instead of in a kernel of their own."""
        side: list[Operation] = []

        def take(v: SSAValue, depth: int) -> None:
            owner = _owner(v)
            if owner is None or owner in members or owner in side:
                return
            if isinstance(owner, nn.ConstantOp):
                if _is_splat(owner):
                    side.append(owner)  # cloned into the group as a literal
                return
            if depth >= MAX_SIDE_DEPTH or op_kind(owner) is not OpKind.ELEMENTWISE:
                return
            if any(u not in members and u not in side for u in _users(v)):
                return
            side.append(owner)
            for o in owner.operands:
                take(o, depth + 1)

        for op in score_ops:
            for o in op.operands:
                take(o, 0)
        return side


def _is_splat(op: nn.ConstantOp) -> bool:
    values = dense_to_numpy(op.value).reshape(-1)
    return bool(values.size) and bool((values == values[0]).all())


# Layout ops an operand of the fused kernel is read through: a broadcast too
# (K and V of multi-query attention, `expand`ed over the heads, read in place).
OPERAND_VIEWS = (*VIEW_OPS, nn.BroadcastToOp)


def _operand_views(value: SSAValue) -> list[Operation]:
    """The longest chain of single-use layout ops ending at `value` that reads
    its source as a strided view."""
    chain: list[Operation] = []
    v = value
    while isinstance(owner := _owner(v), OPERAND_VIEWS) and len(_users(v)) == 1 \
            and len(list(v.uses)) == 1:
        chain.insert(0, owner)
        v = owner.operands[0]
    for start in range(len(chain)):
        view: StridedView | None = StridedView.contiguous(tensor_shape(chain[start].operands[0]))
        for op in chain[start:]:
            view = forward(view, op) if view is not None else None
        if view is not None:
            return chain[start:]
    return []


def _output_views(value: SSAValue) -> list[Operation]:
    """The longest chain of transposes and reshapes that only pass the
    attention output on, written through as a strided view."""
    chain: list[Operation] = []
    v = value
    while len(users := _users(v)) == 1 and len(list(v.uses)) == 1 and isinstance(
            users[0], (nn.TransposeOp, nn.ReshapeOp)):
        chain.append(users[0])
        v = users[0].results[0]
    for end in range(len(chain), 0, -1):
        view: StridedView | None = StridedView.contiguous(tensor_shape(chain[end - 1].results[0]))
        for op in reversed(chain[:end]):
            view = backward(view, op) if view is not None else None
        if view is not None:
            return chain[:end]
    return []
