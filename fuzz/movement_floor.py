"""The bytes a program must move, at least: what the data-movement bench
divides by the copy rate (`bench/torch_peer.floor_work`) and what the
corpus generator grows its programs to (`fuzz/data_movement.py`), so that
a program said to move 64 MiB moves them.

Every input is read once and every output written once, except:

- an input read only as the table of `nn.gather`s counts at most the
  elements they gather (an embedding table is far larger than the rows a
  batch touches);
- an input read only through `nn.slice`s (after elementwise ops of its own
  shape) counts at most the regions they cut (`sliced_elements`).
"""

from __future__ import annotations

import math

from xdsl.dialects.builtin import TensorType
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, SSAValue

from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.dialects import nn
from fusec.dialects.element_types import element
from fusec.dialects.nn_base import element_type_name, tensor_shape


def _width(t: Attribute) -> int:
    """Bytes of one element of tensor type `t`."""
    assert isinstance(t, TensorType)
    return element(element_type_name(t.element_type)).width


def read_elements(arg: SSAValue) -> int:
    """Elements of input `arg` the program must read (module docstring)."""
    numel = math.prod(tensor_shape(arg))
    uses = list(arg.uses)
    if uses and all(isinstance(u.operation, nn.GatherOp) and u.index == 0 for u in uses):
        rows = sum(math.prod(tensor_shape(u.operation.results[0])) for u in uses)
        return min(numel, rows)
    cut = sliced_elements(arg)
    return numel if cut is None else min(numel, cut)


def floor_bytes(func: FuncOp) -> int:
    """Bytes `func` must move (module docstring)."""
    written = sum(math.prod(t.get_shape()) * _width(t) for t in func.function_type.outputs.data)
    return written + sum(read_elements(a) * _width(a.type) for a in func.body.block.args)


def sliced_elements(value: SSAValue) -> int | None:
    """The elements of `value` a program reads when every path from it goes
    through elementwise ops of its own shape into `nn.slice`s: the sum of the
    regions they cut (capped by `value`'s size; None when some path ends
    elsewhere). Along the innermost axis a strided slice counts its whole span
    (`limit - start`): memory is read in sectors of neighbouring elements."""
    shape = tensor_shape(value)
    slices: list[nn.SliceOp] = []
    frontier, seen = [value], set()
    while frontier:
        v = frontier.pop()
        for use in v.uses:
            op = use.operation
            if isinstance(op, nn.SliceOp):
                slices.append(op)
            elif (op_kind(op) == OpKind.ELEMENTWISE and len(op.results) == 1
                  and tensor_shape(op.results[0]) == shape):
                if op not in seen:
                    seen.add(op)
                    frontier.append(op.results[0])
            else:
                return None
    if not slices:
        return None
    total = 0
    for op in slices:
        extents = [-(-(hi - lo) // step) for lo, hi, step in
                   zip(op.starts, op.limits, op.strides, strict=True)]
        if extents and op.strides[-1] > 1:
            extents[-1] = op.limits[-1] - op.starts[-1]
        total += math.prod(extents)
    return min(total, math.prod(shape))
