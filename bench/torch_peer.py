"""Any `nn` program as a PyTorch function: the eager and torch.compile peers
of programs that have no hand-written peer in bench/peers.py.

`torch_peer(func)` turns a parsed `func.func` into a Python function of torch
tensors that runs the same ops, one torch call per `nn` op (composites as
their torch functional form). `torch.compile` of that function traces the op
sequence, so the same program is timed in torch eager and under inductor.
`floor_work` gives the bytes and flops of the floor for any program.

Only the benchmark suite imports this (PyTorch is an optional extra).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Operation, SSAValue

from fusec.dialects import nn
from fusec.dialects.element_types import element
from fusec.dialects.nn_base import dense_to_numpy, element_type, element_type_name
from fusec.fuzz.movement_floor import read_elements

Tensor = torch.Tensor
Step = Callable[..., Tensor]

_PREDICATES = {"lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
               "eq": torch.eq, "ne": torch.ne}


def _dtype(value: SSAValue) -> torch.dtype:
    return getattr(torch, element(element_type_name(element_type(value))).torch_name)


def _pad(x: Tensor, pads: list[int], value: float) -> Tensor:
    top, left, bottom, right = pads
    return F.pad(x, (left, right, top, bottom), value=value)


def _clamp(op: nn.ClampOp) -> Step:
    return lambda x: torch.clamp(x, op.min, op.max)


def _gelu(op: nn.GeluOp) -> Step:
    return lambda x: F.gelu(x, approximate="tanh" if op.approximate == "tanh" else "none")


def _reduce(fn: Callable[..., Tensor]) -> Callable[[nn.ReduceOp], Step]:
    return lambda op: lambda x: fn(x, dim=tuple(op.axes), keepdim=op.keepdims)


def _layer_norm(op: nn.LayerNormOp) -> Step:
    def run(x: Tensor, scale: Tensor, bias: Tensor) -> Tensor:
        return F.layer_norm(x, tuple(x.shape[op.axis:]), scale, bias, op.epsilon)
    return run


def _rms_norm(op: nn.RmsNormOp) -> Step:
    def run(x: Tensor, scale: Tensor) -> Tensor:
        dims = tuple(range(op.axis % x.dim(), x.dim()))
        return x * torch.rsqrt((x * x).mean(dim=dims, keepdim=True) + op.epsilon) * scale
    return run


def _batch_norm(op: nn.BatchNormOp) -> Step:
    def run(x: Tensor, scale: Tensor, bias: Tensor, mean: Tensor, var: Tensor) -> Tensor:
        return F.batch_norm(x, mean, var, scale, bias, False, 0.0, op.epsilon)
    return run


def _conv2d(op: nn.Conv2dOp) -> Step:
    def run(x: Tensor, w: Tensor) -> Tensor:
        return F.conv2d(_pad(x, op.pads, 0.0), w, stride=tuple(op.strides),
                        dilation=tuple(op.dilations), groups=op.groups)
    return run


def _max_pool(op: nn.MaxPool2dOp) -> Step:
    return lambda x: F.max_pool2d(_pad(x, op.pads, -math.inf), tuple(op.kernel),
                                  tuple(op.strides))


def _avg_pool(op: nn.AvgPool2dOp) -> Step:
    # Padding is not counted in the average, as in the dialect.
    def run(x: Tensor) -> Tensor:
        total = F.avg_pool2d(_pad(x, op.pads, 0.0), tuple(op.kernel), tuple(op.strides))
        ones = _pad(torch.ones_like(x[:1, :1]), op.pads, 0.0)
        return total / F.avg_pool2d(ones, tuple(op.kernel), tuple(op.strides))
    return run


def _slice(op: nn.SliceOp) -> Step:
    index = tuple(slice(*b) for b in zip(op.starts, op.limits, op.strides, strict=True))
    return lambda x: x[index]


def _cast(op: nn.CastOp) -> Step:
    target = _dtype(op.result)
    if target == torch.bool:
        return lambda x: x != 0
    return lambda x: x.to(target)


def _constant(op: nn.ConstantOp) -> Step:
    value = torch.from_numpy(dense_to_numpy(op.value).copy()).to(_dtype(op.result))
    cache: dict[torch.device, Tensor] = {}

    def run(device: torch.device) -> Tensor:
        if device not in cache:
            cache[device] = value.to(device)
        return cache[device]
    return run


def _plain(fn: Callable[..., Tensor]) -> Callable[[Operation], Step]:
    return lambda op: fn


STEPS: dict[type[Operation], Callable[[Any], Step]] = {
    nn.NegOp: _plain(torch.neg), nn.AbsOp: _plain(torch.abs), nn.ExpOp: _plain(torch.exp),
    nn.LogOp: _plain(torch.log), nn.SqrtOp: _plain(torch.sqrt), nn.RsqrtOp: _plain(torch.rsqrt),
    nn.ReciprocalOp: _plain(torch.reciprocal), nn.TanhOp: _plain(torch.tanh),
    nn.ErfOp: _plain(torch.erf), nn.SinOp: _plain(torch.sin), nn.CosOp: _plain(torch.cos),
    nn.SigmoidOp: _plain(torch.sigmoid),
    nn.ReluOp: _plain(torch.relu), nn.SiluOp: _plain(F.silu), nn.GeluOp: _gelu,
    nn.ClampOp: _clamp,
    nn.AddOp: _plain(torch.add), nn.SubOp: _plain(torch.sub), nn.MulOp: _plain(torch.mul),
    nn.DivOp: _plain(torch.div), nn.MaxOp: _plain(torch.maximum),
    nn.MinOp: _plain(torch.minimum), nn.PowOp: _plain(torch.pow),
    nn.CmpOp: lambda op: _PREDICATES[op.predicate],
    nn.SelectOp: _plain(torch.where), nn.CastOp: _cast, nn.ConstantOp: _constant,
    nn.ReduceSumOp: _reduce(torch.sum), nn.ReduceMeanOp: _reduce(torch.mean),
    nn.ReduceMaxOp: _reduce(torch.amax), nn.ReduceMinOp: _reduce(torch.amin),
    nn.SoftmaxOp: lambda op: lambda x: torch.softmax(x, dim=op.axis),
    nn.LogSoftmaxOp: lambda op: lambda x: torch.log_softmax(x, dim=op.axis),
    nn.LayerNormOp: _layer_norm, nn.RmsNormOp: _rms_norm, nn.BatchNormOp: _batch_norm,
    nn.MatmulOp: _plain(torch.matmul), nn.Conv2dOp: _conv2d,
    nn.MaxPool2dOp: _max_pool, nn.AvgPool2dOp: _avg_pool,
    nn.ReshapeOp: lambda op: lambda x: x.reshape(tuple(op.result_shape)),
    nn.BroadcastToOp: lambda op: lambda x: x.expand(tuple(op.result_shape)),
    nn.TransposeOp: lambda op: lambda x: x.permute(tuple(op.perm)),
    nn.SliceOp: _slice,
    nn.ConcatOp: lambda op: lambda *xs: torch.cat(xs, dim=op.axis),
    nn.GatherOp: lambda op: lambda t, i: torch.index_select(t, op.axis, i.reshape(-1)).reshape(
        tuple(op.result_shape)),
}


def torch_peer(func: FuncOp) -> Callable[..., Any]:
    """The function of `func` as a function of torch tensors (a tensor, or a
    tuple of them for several results)."""
    block = func.body.block
    plan: list[tuple[Step, list[SSAValue], list[SSAValue], bool]] = []
    outputs: list[SSAValue] = []
    for op in block.ops:
        if isinstance(op, ReturnOp):
            outputs = list(op.operands)
            break
        make = STEPS.get(type(op))
        if make is None:
            raise NotImplementedError(f"no torch peer for {op.name}")
        plan.append((make(op), list(op.operands), list(op.results),
                     isinstance(op, nn.ConstantOp)))
    args = list(block.args)

    def run(*inputs: Tensor) -> Any:
        env: dict[SSAValue, Tensor] = dict(zip(args, inputs, strict=True))
        device = inputs[0].device
        for step, operands, results, constant in plan:
            value = step(device) if constant else step(*(env[v] for v in operands))
            env[results[0]] = value
        outs = [env[v] for v in outputs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    return run


def floor_work(func: FuncOp, inputs: list[Tensor], outputs: list[Tensor]) -> tuple[int, float]:
    """(bytes that must move, flops of the contractions) of any program:
    every output written once, every input read once except what
    `fuzz/movement_floor.read_elements` leaves out (a gathered table counts
    the rows gathered, an input read only through `nn.slice`s the regions
    they cut), at the element sizes of the tensors given."""
    moved = sum(t.numel() * t.element_size() for t in outputs)
    for arg, t in zip(func.body.block.args, inputs, strict=True):
        moved += read_elements(arg) * t.element_size()
    flops = 0.0
    for op in func.body.block.ops:
        if isinstance(op, nn.MatmulOp):
            out = op.results[0].type.get_shape()
            k = op.operands[0].type.get_shape()[-1]
            flops += 2.0 * math.prod(out) * k
        elif isinstance(op, nn.Conv2dOp):
            out = op.results[0].type.get_shape()
            _, cg, kh, kw = op.operands[1].type.get_shape()
            flops += 2.0 * math.prod(out) * cg * kh * kw
    return moved, flops if flops else math.nan
