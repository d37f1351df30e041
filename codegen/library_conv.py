"""A window group marked `conv = "library"` (`scheduling/conv_choice.py`)
becomes a cuDNN convolution in the plan, not a kernel:

```json
{"kernel": "cudnn_conv_f16", "library": "cudnn_conv_f16", "x": "v0", "w": "v1", "y": "v2",
 "strides": [1, 1], "pads": [1, 1, 1, 1], "dilations": [1, 1], "groups": 1, "tf32": false,
 "args": [{"value": "v0", ...}, {"value": "v1", ...}, {"value": "v2", "writes": true}]}
```

`x` (NCHW) and `w` (OIHW) are the values the convolution reads, `y` its
result (NCHW); a channels-last convolution (`passes/channels_last.py`) adds
`"layout": "nhwc"`, and then `x` and `y` are NHWC and `w` is OHWI; `pads`
are `[top, left, bottom, right]` with top = bottom and left = right (cuDNN
pads symmetrically: the choice keeps other convolutions fused); `tf32`
allows f32 on TF32 tensor cores. The runtime runs it with
cuDNN on the plan's stream (`runtime/cudnn_conv.py`); the epilogue the
group had is a pointwise group after it.

`LibraryConvWriter` is the writer of backend "library", kind "window" in
the registry of `codegen/writers.py`.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import BlockArgument

from fusec.analysis.cudnn_library import TF32_ATTR
from fusec.analysis.device_dtypes import value_dtype
from fusec.analysis.diagnostics import op_error
from fusec.analysis.program import ArgSpec, KernelLaunch
from fusec.codegen.writers import LIBRARY, WriteTask, Written
from fusec.dialects import nn
from fusec.dialects.element_types import of_device_dtype
from fusec.dialects.fusion import YieldOp
from fusec.dialects.nn_base import tensor_shape
from fusec.scheduling.conv_choice import conv_call

CONV_KEYS = ("library", "x", "w", "y", "strides", "pads", "dilations", "groups", "tf32",
             "layout")
"""The keys of a library convolution launch."""
CONV_PREFIX = "cudnn_conv_"


def is_conv(spec: dict[str, Any]) -> bool:
    """Whether a library launch is a convolution (else a GEMM)."""
    return str(spec.get("library", "")).startswith(CONV_PREFIX)


def library_conv_launch(task: WriteTask) -> KernelLaunch:
    """The plan launch of a library convolution group."""
    group = task.group
    ops = [op for op in group.block.ops if not isinstance(op, (YieldOp, nn.ConstantOp))]
    last = group.block.last_op
    conv = ops[0] if len(ops) == 1 and isinstance(ops[0], nn.Conv2dOp) else None
    if conv is None or not isinstance(last, YieldOp) or list(last.operands) != [conv.result]:
        raise op_error(group, 'a conv = "library" group must be one nn.conv2d and yield '
                       "its result")
    if not all(isinstance(v, BlockArgument) for v in conv.operands):
        raise op_error(group, "a library convolution reads its input and weight directly")
    name = of_device_dtype(value_dtype(conv.result)).library_conv
    if not name:
        raise op_error(group, f"no library convolution for {value_dtype(conv.result)}")
    outer = [group.inputs[v.index] for v in conv.operands if isinstance(v, BlockArgument)]
    x, w = (task.value_id(v, group) for v in outer)
    y = task.value_id(group.outputs[0], group)
    tf32 = group.attributes.get(TF32_ATTR) == StringAttr("true")
    spec: dict[str, Any] = {"library": name, "x": x, "w": w, "y": y,
                            **conv_call(conv, tf32).spec()}
    args = [ArgSpec(x, tensor_shape(outer[0]), False), ArgSpec(w, tensor_shape(outer[1]), False),
            ArgSpec(y, tensor_shape(conv.result), True)]
    return KernelLaunch(kernel=name, grid=(0, 0, 0), block=(0, 0, 0), shared_bytes=0,
                        args=args, ops=[op.name for op in ops], group=task.group_name,
                        library=spec)


class LibraryConvWriter:
    """The "library" backend's window writer: the group's cuDNN launch
    (`library_conv_launch`), no kernel."""

    backend = LIBRARY
    kind = "window"

    def write(self, task: WriteTask) -> Written:
        """The library launch of `task.group`."""
        return library_conv_launch(task)
