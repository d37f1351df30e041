"""The part of a library GEMM's epilogue that cuBLASLt computes in the same call.

cuBLASLt's matmul computes `D = act(alpha * op(A) op(B) + beta * C + bias)`
in one kernel (`runtime/cublaslt.py`): `bias` a vector along the output's
last axis broadcast over its rows (CUBLASLT_EPILOGUE_BIAS), `C` a full-shape
tensor read from another buffer (beta = 1: a residual add), `act` relu or
the tanh form of GELU (CUBLASLT_EPILOGUE_RELU / GELU, with or without the
bias). So the leading ops of a library GEMM's epilogue that have that form
need no kernel of their own re-reading the product:

```
%m = nn.matmul %x, %w           -> library call
%s = nn.add %m, %b              -> bias     (b: [N], [1, N], ... or a reshape of such)
%t = nn.add %s, %r              -> residual (r: the result's shape)
%g = nn.gelu %t {approximate = "tanh"}   -> activation
%y = nn.mul %g, %two            -> stays a pointwise kernel reading D
```

The bias and the residual add may come in either order (cuBLASLt sums both
in the f32 scale type before the activation), each at most once; the
activation ends the fold, since cuBLASLt applies it last: in
`relu(x @ w + b) + r` only `relu(x @ w + b)` folds. The fold also stops at a
value needed elsewhere (used twice, or a group output): cuBLASLt writes only
D. The exact (erf) GELU is not cuBLASLt's GELU and never folds. Only f32,
f16 and bf16 results fold, and only when cuBLASLt's strided batch can
address every operand (`runtime/cublas_direct.batch_stride`); the bias is
then the same vector for every batch entry (CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE
left at its default 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from fusec.dialects import nn
from fusec.dialects.nn_base import element_type, element_type_name, tensor_shape

FOLD_ELEMENTS = frozenset({"f32", "f16", "bf16"})
"""Result types whose library GEMM runs through cuBLASLt with an epilogue."""

ACTIVATIONS = ("relu", "gelu_tanh")
"""The plan's `activation` values (cuBLASLt's RELU and GELU epilogues)."""


@dataclass(frozen=True)
class EpilogueFold:
    """The ops folded into the library call (in program order, the views of
    the bias and residual included) and what they give the call."""

    ops: tuple[Operation, ...] = ()
    bias: SSAValue | None = None  # the value holding the N-element bias vector
    residual: SSAValue | None = None  # the full-shape value added as C
    activation: str | None = None  # one of ACTIVATIONS

    def __bool__(self) -> bool:
        return bool(self.ops)

    def inputs(self) -> list[SSAValue]:
        """The values the call reads besides A and B (bias first)."""
        return [v for v in (self.bias, self.residual) if v is not None]

    def describe(self) -> str:
        """`nn.add (bias), nn.gelu (gelu_tanh)`: the folded ops, for remarks."""
        parts: list[str] = []
        for op in self.ops:
            if isinstance(op, nn.ReshapeOp):
                continue
            role = self.activation if not isinstance(op, nn.AddOp) else (
                "bias" if self.bias is not None and _reads(op, self.bias, self.ops)
                else "residual")
            parts.append(f"{op.name} ({role})")
        return ", ".join(parts)


def _reads(op: Operation, value: SSAValue, ops: Sequence[Operation]) -> bool:
    """Whether `op` reads `value`, directly or through one of `ops` (a view)."""
    for v in op.operands:
        if v is value or (v.owner in ops and isinstance(v.owner, nn.ReshapeOp)
                          and v.owner.operands[0] is value):
            return True
    return False


def fold_epilogue(mm: nn.MatmulOp, ops: Sequence[Operation], inputs: Iterable[SSAValue],
                  outputs: Iterable[SSAValue]) -> EpilogueFold:
    """The leading epilogue ops of `mm` (among `ops`, a group's body) that
    cuBLASLt computes in the GEMM's call: reading only `inputs` (the group's
    inputs) besides the chain, every intermediate used once and none of
    `outputs` (the group's results) but the last."""
    name = element_type_name(element_type(mm.result))
    if name not in FOLD_ELEMENTS or not _strided(mm, ops):
        return EpilogueFold()
    inside, sources, outs = set(ops), frozenset(inputs), set(outputs)
    out = tensor_shape(mm.result)
    folded: list[Operation] = []
    bias = residual = activation = None
    cur: SSAValue = mm.result
    while activation is None and cur not in outs and len(list(cur.uses)) == 1:
        user = next(iter(cur.uses)).operation
        if user not in inside:
            break
        if isinstance(user, nn.AddOp) and tuple(tensor_shape(user.results[0])) == tuple(out):
            other = user.operands[1] if user.operands[0] is cur else user.operands[0]
            if other is cur:
                break
            loaded, view = _loaded(other, inside, sources)
            if loaded is None or element_type(other) != element_type(cur):
                break
            if bias is None and _is_bias(tensor_shape(other), out):
                bias = loaded
            elif residual is None and tuple(tensor_shape(other)) == tuple(out):
                residual = loaded
            else:
                break
            folded += [*view, user]
        elif (act := _activation(user)) is not None:
            activation = act
            folded.append(user)
        else:
            break
        cur = user.results[0]
    return EpilogueFold(tuple(folded), bias, residual, activation)


def _activation(op: Operation) -> str | None:
    if isinstance(op, nn.ReluOp):
        return "relu"
    if isinstance(op, nn.GeluOp) and op.approximate == "tanh":
        return "gelu_tanh"
    return None  # the erf GELU is not cuBLASLt's


def _is_bias(shape: Sequence[int], out: Sequence[int]) -> bool:
    """A vector over the result's last axis, broadcast over every other."""
    if len(shape) > len(out) or not shape:
        return False
    padded = (1,) * (len(out) - len(shape)) + tuple(shape)
    return padded[-1] == out[-1] and all(d == 1 for d in padded[:-1])


def _loaded(value: SSAValue, inside: set[Operation], sources: frozenset[SSAValue]
            ) -> tuple[SSAValue | None, list[Operation]]:
    """The group input `value` reads (itself, or the source of a reshape
    used only here: a view of the same buffer) and that view op."""
    if value in sources:
        return value, []
    owner = value.owner
    if (isinstance(owner, nn.ReshapeOp) and owner in inside and len(list(value.uses)) == 1
            and owner.operands[0] in sources):
        return owner.operands[0], [owner]
    return None, []


def _strided(mm: nn.MatmulOp, ops: Sequence[Operation]) -> bool:
    """Whether one strided-batched cuBLASLt call addresses both operands:
    each operand's batch is the result's or broadcast whole (the rule of
    `runtime/cublas_direct.batch_stride`)."""
    batch = tuple(tensor_shape(mm.result)[:-2])
    for v in mm.operands:
        owner = v.owner
        loaded = owner.operands[0] if isinstance(owner, nn.TransposeOp) and owner in ops else v
        own = tuple(tensor_shape(loaded)[:-2])
        padded = (1,) * (len(batch) - len(own)) + own
        if len(own) > len(batch) or not (all(d == 1 for d in padded) or padded == batch):
            return False
    return True
