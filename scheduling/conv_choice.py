"""Library convolution or fusec's own window kernel, per convolution group.

`tile-and-promote` asks `ConvChooser.decide` for every window group whose
convolution cuDNN can compute (`library_conv`). The cost model
(`cost_model.conv_choice`) prices both: cuDNN at the target's library
convolution rate plus a separate kernel for whatever the group computes
after the convolution (its epilogue, a pool), against fusec's window kernel
with all of it inside. When the library wins, the group is split after its
convolution: the convolution alone becomes a group marked
`backend = "library"` (code generation turns it into a plan launch
`{"library": "cudnn_conv_f16", ...}`, `codegen/library_conv.py`), the rest
a group of its own.

```mlir
%y = fusion.group (%x, %w) {name = "g0_s0", kind = "window", backend = "library"} ...
%z = fusion.group (%y, %s, %t) {name = "g0_s1", kind = "pointwise"} ...
```

cuDNN needs the convolution to read its input and weight directly (group
inputs), to pad symmetrically (top = bottom, left = right) and a float type
whose row of `dialects/element_types.py` names a `library_conv`; other
convolutions stay fusec's.
Where cuDNN is not installed (or in the simulator) every convolution is
fusec's own, with a remark saying so in `auto` mode and a `missed` remark
under `--conv library`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import BlockArgument, Operation

from fusec.analysis.cost_model import ConvChoice, conv_choice
from fusec.analysis.cudnn_library import TF32_ATTR
from fusec.analysis.device_dtypes import value_dtype
from fusec.analysis.diagnostics import FusecError, op_error
from fusec.analysis.group_kind import BACKEND_ATTR, LIBRARY_BACKEND
from fusec.analysis.remarks import RemarkCollector
from fusec.analysis.targets import Target
from fusec.dialects import nn
from fusec.dialects.element_types import of_device_dtype
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import numel
from fusec.scheduling.gemm_choice import GroupSplitter, split_head
from fusec.scheduling.kinds.common import group_name
from fusec.scheduling.library_tuning import ChoicePoint, LibraryCall, LibraryTuner, tuned_choice

CONV_MODES = ("auto", "library", "fused")


CUDNN_ELEMENTS = 1 << 31
"""cuDNN's tensor descriptors hold 32-bit strides: a tensor this large stays
fusec's."""


def _ops(group: GroupOp) -> list[Operation]:
    return [op for op in group.block.ops if not isinstance(op, YieldOp)]


def refusal(conv: nn.Conv2dOp) -> str:
    """Why cuDNN cannot compute `conv` ("" where it can)."""
    if max(numel(tensor_shape(v)) for v in (*conv.operands, conv.result)) >= CUDNN_ELEMENTS:
        return "a tensor of 2^31 elements or more (cuDNN's 32-bit strides)"
    top, left, bottom, right = conv.pads
    if top != bottom or left != right:
        return f"asymmetric padding {conv.pads}"
    if not of_device_dtype(value_dtype(conv.result)).library_conv:
        return f"no library convolution for {value_dtype(conv.result)}"
    return ""


def channels_last_conv(group: GroupOp) -> nn.Conv2dOp | None:
    """`group`'s channels-last convolution, which only cuDNN computes."""
    return next((op for op in _ops(group) if isinstance(op, nn.Conv2dOp) and op.channels_last),
                None)


def library_conv(group: GroupOp) -> tuple[nn.Conv2dOp | None, str]:
    """The convolution of `group` cuDNN can compute, or None and why not."""
    conv = next((op for op in _ops(group) if isinstance(op, nn.Conv2dOp)), None)
    if conv is None:
        return None, "no convolution"
    why = refusal(conv)
    return (None, why) if why else (conv, "")


def conv_call(conv: nn.Conv2dOp, tf32: bool) -> LibraryCall:
    """`conv` as the cuDNN launch that computes it (`codegen/library_conv.py`),
    without value names; `tf32` lets an f32 convolution use TF32."""
    row = of_device_dtype(value_dtype(conv.result))
    keys: list[tuple[str, object]] = [
        ("library", row.library_conv), ("strides", list(conv.strides)),
        ("pads", list(conv.pads)), ("dilations", list(conv.dilations)),
        ("groups", conv.groups), ("tf32", tf32 and row.name == "f32")]
    if conv.channels_last:
        keys.append(("layout", conv.layout))
    shapes = tuple(tuple(tensor_shape(v)) for v in (conv.x, conv.weight, conv.result))
    return LibraryCall(tuple(keys), shapes)


def _only_library(conv: nn.Conv2dOp, why: str) -> FusecError:
    return op_error(conv, f'a channels-last convolution (layout = "nhwc") runs only as a cuDNN '
                    f"call, and {why}; run channels-last before tile-and-promote with the same "
                    "--conv, which keeps it channels first")


def _nbytes(shape: tuple[int, ...] | list[int], width: int) -> int:
    return numel(tuple(shape)) * width


def _work(conv: nn.Conv2dOp) -> tuple[float, int]:
    """The convolution's FLOPs and the bytes of its input and weight."""
    width = of_device_dtype(value_dtype(conv.result)).width
    w = tensor_shape(conv.weight)
    flops = 2.0 * numel(tensor_shape(conv.result)) * numel(w[1:])
    return flops, sum(_nbytes(tensor_shape(v), width) for v in conv.operands)


def conv_alone(target: Target, conv: nn.Conv2dOp, mode: str, available: bool,
               tf32: bool) -> ConvChoice:
    """Library or own for `conv` before it has a group (`channels-last`):
    priced as the group it will head, with an elementwise epilogue of
    per-channel operands (a bias or a batch norm's scale and shift, then an
    activation), what a convolution of a CNN carries."""
    row = of_device_dtype(value_dtype(conv.result))
    out = tensor_shape(conv.result)
    flops, io = _work(conv)
    result = _nbytes(out, row.width)
    channels = out[conv.channel_axis]
    return conv_choice(target, flops, io + result, result, 2 * channels * row.width,
                       target.own_conv_flops_fraction, mode, available, row.name,
                       tf32 and row.name == "f32", channels // conv.groups)


@dataclass
class ConvChooser:
    """Decides per convolution group and rewrites the library choice."""

    family: ClassVar[str] = "conv"  # its `ChoicePoint.family`
    target: Target
    mode: str
    available: bool
    remarks: RemarkCollector
    tf32: bool = False  # f32 convolutions may run on TF32 tensor cores
    # `--autotune` (`scheduling/library_tuning.py`): what overrules the model's
    # choice in `auto` mode, and how a group is scheduled alone in a mode.
    tuner: LibraryTuner | None = None
    schedule_alone: Callable[[ModuleOp, str], None] = field(default=lambda _m, _mode: None)

    def price(self, group: GroupOp, conv: nn.Conv2dOp) -> ConvChoice:
        """Both estimates for `group`'s convolution."""
        row = of_device_dtype(value_dtype(conv.result))
        out = tensor_shape(conv.result)
        flops, io = _work(conv)
        result = _nbytes(out, row.width)
        ops = _ops(group)
        before = [op for op in ops[:ops.index(conv)] if not isinstance(op, nn.ConstantOp)]
        prologue = 0
        if before:  # reads its inputs, writes the convolution's input
            reads = [a for a in group.block.args if any(u.operation in before for u in a.uses)]
            prologue = _nbytes(tensor_shape(conv.x), row.width) + sum(
                _nbytes(tensor_shape(a), of_device_dtype(value_dtype(a)).width) for a in reads)
        rest = [op for op in ops[ops.index(conv) + 1:] if not isinstance(op, nn.ConstantOp)]
        epilogue = 0
        if rest:
            others = [a for a in group.block.args if any(u.operation in rest for u in a.uses)]
            width = of_device_dtype(value_dtype(ops[-1].results[0])).width
            epilogue = sum(_nbytes(tensor_shape(a), of_device_dtype(value_dtype(a)).width)
                           for a in others)
            result = max(result, _nbytes(tensor_shape(ops[-1].results[0]), width))
        # conv + pool is a direct loop over channels and taps; else the tiled kernel
        tiled = not any(isinstance(op, (nn.MaxPool2dOp, nn.AvgPool2dOp)) for op in rest)
        fraction = (self.target.own_conv_flops_fraction if tiled
                    else self.target.direct_window_flops_fraction)
        return conv_choice(self.target, flops, io + result, result, epilogue, fraction,
                           self.mode, self.available, row.name, self.tf32 and row.name == "f32",
                           out[conv.channel_axis] // conv.groups, prologue)

    def planned(self, group: GroupOp) -> bool:
        """Whether `group`'s convolution goes to cuDNN, as `decide` will
        choose it (channels-last, `--conv library`, or the cost model),
        without a remark or a rewrite. A group whose prologue or epilogue
        then turns out not to split from the convolution keeps fusec's
        kernel in `decide` though planned here."""
        conv, _ = library_conv(group)
        if conv is None:
            return channels_last_conv(group) is not None
        return conv.channels_last or self.price(group, conv).library

    def decide(self, group: GroupOp, splitter: GroupSplitter) -> GroupOp:
        """The group to schedule: `group` itself, or its convolution alone
        (marked library) after `splitter` split the rest off."""
        conv, why = library_conv(group)
        last = channels_last_conv(group)
        if last is not None and (conv is None or not self.available or self.mode == "fused"):
            raise _only_library(last, why or ("cuDNN is not installed" if not self.available
                                              else "--conv fused asks for fusec's kernel"))
        if conv is None:
            if self.mode == "library" and why != "no convolution":
                self.remarks.add("missed", f"group {group_name(group)}: --conv library: {why}; "
                                 "fusec's own kernel")
            return group
        if conv.channels_last:  # chosen before grouping, and no kernel of fusec's computes it
            self.remarks.add("remark", f"group {group_name(group)}: channels-last convolution: "
                             "cuDNN (chosen by channels-last)")
        else:
            choice = self.price(group, conv)
            self.remarks.add("remark", f"group {group_name(group)}: {choice.summary()}")
            tuned = tuned_choice(self.tuner, self.mode, lambda: ChoicePoint(
                self.family, group, choice.library, choice.t_library * 1e6, choice.t_own * 1e6,
                self.available, f"tf32={self.tf32}", self.schedule_alone,
                conv_call(conv, self.tf32), choice.t_call * 1e6),
                lambda note: self.remarks.add("remark", f"group {group_name(group)}: {note}"))
            if not (choice.library if tuned is None else tuned):
                return group
        ops = _ops(group)
        first = ops.index(conv)
        if any(not isinstance(o, nn.ConstantOp) for o in ops[:first]):
            # a prologue fused into the convolution: its own kernel before the call
            if first not in splitter.legal_splits(group):
                if conv.channels_last:
                    raise _only_library(conv, "what computes its input cannot be split from it")
                self.remarks.add("missed", f"group {group_name(group)}: what computes the "
                                 "convolution's input cannot be split from it; fusec's own "
                                 "kernel")
                return group
            _, group = splitter.split_group(group, first)
            ops = _ops(group)
        k = ops.index(conv) + 1
        if not all(isinstance(v, BlockArgument) for v in conv.operands):
            if conv.channels_last:
                raise _only_library(conv, "its operands are not read directly")
            self.remarks.add("missed", f"group {group_name(group)}: the convolution's operands "
                             "are not read directly; fusec's own kernel")
            return group
        head = split_head(group, k, splitter)
        if head is None:
            if conv.channels_last:
                raise _only_library(conv, "what follows it cannot be split from it")
            self.remarks.add("missed", f"group {group_name(group)}: what follows the "
                             "convolution cannot be split from it; fusec's own kernel")
            return group
        head.attributes[BACKEND_ATTR] = StringAttr(LIBRARY_BACKEND)
        if self.tf32 and of_device_dtype(value_dtype(conv.result)).name == "f32":
            head.attributes[TF32_ATTR] = StringAttr("true")
        return head
