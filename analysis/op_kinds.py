"""The kind of every `nn` op, as fusion and code generation see it."""

from __future__ import annotations

from enum import Enum

from xdsl.ir import Operation

from fusec.dialects import nn


class OpKind(Enum):
    """How an op touches memory: decides what it may fuse with and how it is
    scheduled."""

    ELEMENTWISE = "elementwise"  # out[i] depends on in[i] (with broadcasting)
    BROADCAST = "broadcast"  # nn.broadcast_to: a read with repeated indices
    LAYOUT = "layout"  # moves elements: reshape, transpose, slice, concat, gather
    REDUCTION = "reduction"  # reduce_* and the composites that contain one
    CONTRACTION = "contraction"  # matmul
    WINDOW = "window"  # conv2d and pools
    CONSTANT = "constant"  # nn.constant: data, not a kernel
    OPAQUE = "opaque"  # anything else: never fused


_KINDS: dict[type[Operation], OpKind] = {
    **dict.fromkeys(
        (
            nn.NegOp, nn.AbsOp, nn.ExpOp, nn.LogOp, nn.SqrtOp, nn.RsqrtOp, nn.ReciprocalOp,
            nn.TanhOp, nn.ErfOp, nn.SinOp, nn.CosOp, nn.SigmoidOp, nn.ReluOp, nn.SiluOp,
            nn.GeluOp, nn.ClampOp,
            nn.AddOp, nn.SubOp, nn.MulOp, nn.DivOp, nn.MaxOp, nn.MinOp, nn.PowOp,
            nn.CmpOp, nn.SelectOp, nn.CastOp,
        ),
        OpKind.ELEMENTWISE,
    ),
    nn.BroadcastToOp: OpKind.BROADCAST,
    **dict.fromkeys(
        (nn.ReshapeOp, nn.TransposeOp, nn.SliceOp, nn.ConcatOp, nn.GatherOp), OpKind.LAYOUT
    ),
    **dict.fromkeys(
        (
            nn.ReduceSumOp, nn.ReduceMaxOp, nn.ReduceMinOp, nn.ReduceMeanOp,
            nn.SoftmaxOp, nn.LogSoftmaxOp, nn.LayerNormOp, nn.RmsNormOp,
        ),
        OpKind.REDUCTION,
    ),
    nn.BatchNormOp: OpKind.ELEMENTWISE,
    nn.MatmulOp: OpKind.CONTRACTION,
    **dict.fromkeys((nn.Conv2dOp, nn.MaxPool2dOp, nn.AvgPool2dOp), OpKind.WINDOW),
    nn.ConstantOp: OpKind.CONSTANT,
}


def op_kind(op: Operation) -> OpKind:
    """The kind of `op`; ops outside `nn` are opaque."""
    return _KINDS.get(type(op), OpKind.OPAQUE)
