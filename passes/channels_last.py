"""The `channels-last` pass: the convolutions cuDNN computes work in NHWC,
and the layout changes they need are moved to the edges of the graph.

cuDNN's tensor-core convolutions read and write NHWC tensors. Handed NCHW
ones, it transposes the input (and the weight) into NHWC before every
convolution and the result back after it: on a ResNet-50 those copies were
a sixth of the GPU time. This pass writes each convolution that cuDNN will
compute (the cost model's choice, `conv_choice.conv_alone`, as
`tile-and-promote` would make it) in channels-last form, between two
transposes that keep the program's meaning:

```mlir
// before
%y = nn.conv2d %x, %w {...} : (tensor<8x64x56x56xf32>, tensor<64x64x3x3xf32>) -> (...)
// after
%x_l = nn.transpose %x {perm = [0, 2, 3, 1]} : (...) -> tensor<8x56x56x64xf32>
%w_l = nn.transpose %w {perm = [0, 2, 3, 1]} : (...) -> tensor<64x3x3x64xf32>
%y_l = nn.conv2d %x_l, %w_l {..., layout = "nhwc"} : (...) -> tensor<8x56x56x64xf32>
%y = nn.transpose %y_l {perm = [0, 3, 1, 2]} : (...) -> tensor<8x64x56x56xf32>
```

Then every transpose back to NCHW moves down through what reads it, as
long as that costs no new copy:

- an elementwise op whose operands of the full shape are all transposes
  the same way (a batch norm's scale and shift, an activation, a residual
  add of two convolutions' results) computes in NHWC instead, its
  broadcast operands permuted to match (a `[C, 1, 1]` scale becomes
  `[1, 1, 1, C]`, a reshape), and the transpose moves below it;
- a reduction keeping its dimensions (a global average pool) reduces the
  NHWC axes, and the transpose of its small result is a reshape;
- a transpose of a transpose is one transpose, or none: where the moved
  transpose meets the one before the next convolution, both go.

So a chain conv - batch norm - relu - conv, and a residual block, hold
their activations in NHWC from end to end; transposes stay only where an
NCHW value meets an NHWC one (the network's input, a max pool, a
convolution left to fusec's own kernel), and there the pointwise group
reading them goes through a shared-memory tile (docs/fusion.md). A weight
that is a constant is transposed once by `fold-constants`; a 1x1 weight's
transpose is a reshape.

Turning pays for the copies cuDNN would make: two per convolution with a
window larger than 1x1 (a 1x1 convolution is a GEMM in either layout, and
cuDNN copies nothing for it). Where the transposes left would be as many,
the function stays NCHW (a convolution alone between NCHW values; 1x1
convolutions between depthwise ones left to fusec's kernel).

A channels-last convolution runs only as a cuDNN call (`tile-and-promote`
takes the library for it without pricing it again). Where cuDNN is not
installed, in the simulator and under `conv = "fused"`, nothing is turned,
and a channels-last convolution of the input program is written back as
its NCHW twin between transposes (fusec's own kernel computes that).

Options: `target`, `conv` and `conv_tf32` (as `tile-and-promote`'s, which
the default pipeline passes to both), `nhwc` (false: only write
channels-last convolutions back; the pipeline's choice without fusion,
where every transpose would be a kernel of its own), `remarks`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr, TensorType
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from fusec.analysis.cudnn_library import cudnn_available
from fusec.analysis.device_dtypes import value_dtype
from fusec.analysis.diagnostics import counted
from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.analysis.remarks import RemarkCollector
from fusec.analysis.rewriting import copy_location
from fusec.analysis.targets import resolve_target, unknown_target
from fusec.dialects import nn
from fusec.dialects.element_types import of_device_dtype
from fusec.dialects.nn_base import int_list, tensor_shape
from fusec.dialects.nn_structured import NCHW, NHWC, TO_FIRST, TO_LAST
from fusec.dialects.shapes import reduced_shape
from fusec.passes.sink_transposes import as_reshape, keeps_order, sink_one, transposed_operand
from fusec.scheduling.conv_choice import CONV_MODES, conv_alone, refusal

TENSOR_CORE_TYPES = ("f32", "f16", "bf16")
"""The element types whose NHWC convolutions cuDNN runs on tensor cores
(f32 through TF32): f64 stays NCHW."""


def _typed(like: SSAValue, shape: tuple[int, ...]) -> TensorType[Attribute]:
    t = like.type
    assert isinstance(t, TensorType)
    return TensorType(t.element_type, shape)


def _permuted(shape: tuple[int, ...], perm: list[int] | tuple[int, ...]) -> tuple[int, ...]:
    return tuple(shape[p] for p in perm)


def _inverse(perm: list[int]) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def _transpose(value: SSAValue, perm: list[int] | tuple[int, ...]) -> nn.TransposeOp:
    return nn.TransposeOp.create(
        operands=[value], result_types=[_typed(value, _permuted(tensor_shape(value), perm))],
        attributes={"perm": int_list(list(perm))})


def _relaid(rewriter: Rewriter, conv: nn.Conv2dOp, layout: str) -> Operation:
    """`conv` in `layout` between transposes of its operands and its result;
    the op giving the result in the old layout (a transpose, or a reshape
    where the transpose keeps the elements' order)."""
    there, back = (TO_LAST, TO_FIRST) if layout == NHWC else (TO_FIRST, TO_LAST)
    operands = [transposed_operand(rewriter, v, 4, list(there), conv) for v in conv.operands]
    attributes = dict(conv.attributes)
    if layout == NHWC:
        attributes["layout"] = StringAttr(NHWC)
    else:
        attributes.pop("layout", None)
    moved = nn.Conv2dOp.create(
        operands=operands, attributes=attributes, properties=dict(conv.properties),
        result_types=[_typed(conv.result, _permuted(tensor_shape(conv.result), there))])
    out = _transpose(moved.results[0], back)
    moved.results[0].name_hint = (conv.result.name_hint or "conv") + f"_{layout}"
    out.results[0].name_hint = conv.result.name_hint
    copy_location(conv, moved, out)
    rewriter.replace_op(conv, [moved, out])
    return out


_Memo = dict[tuple[SSAValue, tuple[int, ...]], SSAValue]


def _broadcast_operand(rewriter: Rewriter, v: SSAValue, rank: int, perm: list[int],
                       at: Operation, memo: _Memo) -> SSAValue:
    """`v`, an operand broadcast over a transposed op, aligned to `rank` and
    transposed by `perm`. Where elementwise ops compute it from smaller
    values (a batch norm's `scale * rsqrt(var + eps)` on `[C, 1, 1]`
    parameters), they are computed again in the permuted shape (`[1, 1, 1,
    C]`), right after the originals, so the pointwise group applying it can
    compute them per element, as it could before; a view of the old result
    would keep them a kernel of their own. `memo` keeps one copy each."""
    key = (v, tuple(perm))
    if key in memo:
        return memo[key]
    shape = tensor_shape(v)
    aligned = (1,) * (rank - len(shape)) + shape
    target = _permuted(aligned, perm)
    op = v.owner
    if all(d == 1 for d in shape) or target == shape:
        return v
    if isinstance(op, nn.ReshapeOp) and keeps_order(aligned, perm) and (
            [d for d in tensor_shape(op.operands[0]) if d != 1] == [d for d in shape if d != 1]):
        new: Operation = nn.ReshapeOp.create(operands=[op.operands[0]],
                                             result_types=[_typed(v, target)])
    elif (isinstance(op, Operation) and op_kind(op) is OpKind.ELEMENTWISE
          and not isinstance(op, nn.BatchNormOp) and len(op.results) == 1):
        operands = [_broadcast_operand(rewriter, u, rank, perm, op, memo) for u in op.operands]
        new = type(op).create(operands=operands, result_types=[_typed(v, target)],
                              attributes=dict(op.attributes), properties=dict(op.properties))
    else:
        return transposed_operand(rewriter, v, rank, perm, at)
    new.results[0].name_hint = (v.name_hint or "v") + "_l"
    copy_location(op, new)
    rewriter.insert_op(new, InsertPoint.after(op))
    memo[key] = new.results[0]
    return new.results[0]


def _through_elementwise(rewriter: Rewriter, t: nn.TransposeOp, op: Operation,
                         memo: _Memo) -> nn.TransposeOp | None:
    """`op(t(a), ...)` as `t(op(a, ...))`, where every operand of the full
    shape is transposed as `t` is; the moved transpose (None: stays)."""
    if (op_kind(op) is not OpKind.ELEMENTWISE or isinstance(op, nn.BatchNormOp)
            or len(op.results) != 1):
        return None
    result = op.results[0]
    shape, perm = tensor_shape(result), t.perm
    if tensor_shape(t.results[0]) != shape:
        return None
    full = [v for v in op.operands if tensor_shape(v) == shape]
    if any(not isinstance(v.owner, nn.TransposeOp) or v.owner.perm != perm for v in full):
        return None  # an operand in the other layout: a copy either way
    inverse = _inverse(perm)
    operands = [v.owner.operands[0] if v in full and isinstance(v.owner, nn.TransposeOp)
                else _broadcast_operand(rewriter, v, len(shape), inverse, op, memo)
                for v in op.operands]
    inner = _permuted(shape, inverse)
    moved = type(op).create(operands=operands, result_types=[_typed(result, inner)],
                            attributes=dict(op.attributes), properties=dict(op.properties))
    out = _transpose(moved.results[0], perm)
    moved.results[0].name_hint = (result.name_hint or "v") + "_l"
    out.results[0].name_hint = result.name_hint
    copy_location(op, moved, out)
    rewriter.replace_op(op, [moved, out])
    return out


def _through_reduction(rewriter: Rewriter, t: nn.TransposeOp, op: nn.ReduceOp
                       ) -> nn.TransposeOp | None:
    """`reduce(t(a), axes, keepdims)` as `t(reduce(a, axes'))`."""
    if not op.keepdims:
        return None
    perm, src = t.perm, t.operands[0]
    rank = len(perm)
    axes = sorted(perm[a % rank] for a in op.axes)
    attributes = dict(op.attributes)
    attributes["axes"] = int_list(axes)
    moved = type(op).create(
        operands=[src], attributes=attributes, properties=dict(op.properties),
        result_types=[_typed(op.results[0], reduced_shape(tensor_shape(src), axes, True))])
    out = _transpose(moved.results[0], perm)
    moved.results[0].name_hint = (op.results[0].name_hint or "r") + "_l"
    out.results[0].name_hint = op.results[0].name_hint
    copy_location(op, moved, out)
    rewriter.replace_op(op, [moved, out])
    return out


def _composed(rewriter: Rewriter, t: nn.TransposeOp, reader: nn.TransposeOp
              ) -> nn.TransposeOp | None:
    """`reader(t(a))` as one transpose of `a`, or `a` itself."""
    perm = [t.perm[p] for p in reader.perm]
    src = t.operands[0]
    if perm == list(range(len(perm))):
        reader.results[0].replace_all_uses_with(src)
        rewriter.erase_op(reader)
        return None
    one = _transpose(src, perm)
    one.results[0].name_hint = reader.results[0].name_hint
    copy_location(reader, one)
    rewriter.replace_op(reader, one)
    return one


def sink_down(rewriter: Rewriter, t: nn.TransposeOp, memo: _Memo) -> list[nn.TransposeOp]:
    """Move `t` below each reader it can pass (the module docstring says
    which); the transposes that moved, to try further down."""
    moved: list[nn.TransposeOp | None] = []
    for reader in {u.operation: None for u in t.results[0].uses}:
        if isinstance(reader, nn.TransposeOp):
            moved.append(_composed(rewriter, t, reader))
        elif isinstance(reader, nn.ReduceOp):
            moved.append(_through_reduction(rewriter, t, reader))
        else:
            moved.append(_through_elementwise(rewriter, t, reader, memo))
    if not t.results[0].uses:
        rewriter.erase_op(t)
    return [m for m in moved if m is not None]


@dataclass(frozen=True)
class ChannelsLastPass(ModulePass):
    """Run cuDNN's convolutions in NHWC, with the layout changes at the graph's edges.

    The module docstring says which convolutions turn and where the
    transposes go."""

    name = "channels-last"

    target: str = "auto"
    conv: str = "auto"
    conv_tf32: bool = False
    nhwc: bool = True
    remarks: bool = True

    def __post_init__(self) -> None:
        if self.conv not in CONV_MODES:
            raise ValueError(f"conv must be one of {', '.join(CONV_MODES)}")
        if (problem := unknown_target(self.target)) is not None:
            raise ValueError(problem)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        available = self.conv != "fused" and cudnn_available()
        rewriter = Rewriter()
        collector = RemarkCollector()
        for func in [f for f in op.walk() if isinstance(f, FuncOp)]:
            for conv in [o for o in func.walk() if isinstance(o, nn.Conv2dOp)]:
                if conv.channels_last and (not available or refusal(conv)):
                    _relaid(rewriter, conv, NCHW)
            if not (self.nhwc and available):
                continue
            convs = [o for o in func.walk() if isinstance(o, nn.Conv2dOp)]
            if not convs:
                continue
            target, _ = resolve_target(self.target)
            chosen = [i for i, conv in enumerate(convs) if not conv.channels_last
                      and not refusal(conv)
                      and of_device_dtype(value_dtype(conv.result)).name in TENSOR_CORE_TYPES
                      and conv_alone(target, conv, self.conv, available, self.conv_tf32).library]
            if not chosen:
                continue
            trial = func.clone()  # kept only where turning pays
            twins = [o for o in trial.walk() if isinstance(o, nn.Conv2dOp)]
            turned = [twins[i] for i in chosen]
            # cuDNN transposes an NCHW convolution's input and result itself,
            # but for a 1x1 one (a GEMM in either layout): turning pays where
            # fewer transposes are left than that.
            saved = 2 * sum(1 for conv in turned if _windowed(conv))
            edges = _turn(rewriter, trial, turned)
            where = f"@{func.sym_name.data}: {counted(len(turned), 'convolution')} for cuDNN"
            if edges >= saved:
                collector.add("remark", f"{where} kept in NCHW: in NHWC {edges} layout "
                              "transposes would be left where NCHW values meet them")
                continue
            rewriter.replace_op(func, trial)
            collector.add("remark", f"{where} in NHWC (channels last); {edges} layout transposes "
                          "left where NCHW values meet them")
        if self.remarks:
            collector.store(op)


def _windowed(conv: nn.Conv2dOp) -> bool:
    """Whether `conv`'s window is larger than 1x1."""
    return tensor_shape(conv.weight)[2:] != (1, 1)


def _turn(rewriter: Rewriter, func: FuncOp, convs: list[nn.Conv2dOp]) -> int:
    """Turn `convs` to NHWC and move the transposes; how many transposes of
    activations are left (those of weights aside)."""
    work = [t for t in (_relaid(rewriter, conv, NHWC) for conv in convs)
            if isinstance(t, nn.TransposeOp)]
    memo: _Memo = {}
    while work:
        work += sink_down(rewriter, work.pop(), memo)
    # Where a transpose stopped (an NCHW reader, a max pool), it goes back up
    # the ops only it reads: their pointwise group then reads the
    # convolution's result transposed and writes NCHW, instead of writing
    # NHWC for a copy to transpose.
    for t in [o for o in func.walk() if isinstance(o, nn.TransposeOp)]:
        if not t.results[0].uses:  # the other operand of an op a transpose moved below
            rewriter.erase_op(t)
    work = [o for o in func.walk() if isinstance(o, nn.TransposeOp)]
    while work:
        t = work.pop()
        if t.parent is not None and not as_reshape(rewriter, t):
            work += sink_one(rewriter, t)
    weights = {conv.weight for conv in func.walk()
               if isinstance(conv, nn.Conv2dOp) and conv.channels_last}
    return len({(o.operands[0], tuple(o.perm)) for o in func.walk()
                if isinstance(o, nn.TransposeOp) and len(o.perm) == 4
                and o.results[0] not in weights})
