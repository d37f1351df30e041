"""Splat constants a kernel reads as literals, not as arrays.

A splat constant (`dense<1.0> : tensor<65536x65536xf32>`, one value for
every element) that a group reads as an input would be a 16 GiB array in
constants.npz and on the device. Where the group's emitter evaluates the
reader at one point at a time, the value is the same at every point: the
constant moves into the group and the kernel writes it as a literal
(`float32(1.0)`), so no array of its elements exists anywhere.

```mlir
// before
%c = nn.constant dense<1.0> : tensor<65536x65536xf32>
%y = fusion.group (%x, %c) {kind = "contraction"} ... {
^bb0(%a: tensor<4x65536xf32>, %b: tensor<65536x65536xf32>):
  %m = nn.matmul %a, %b : ...
  fusion.yield %m : ...
}
// after
%y = fusion.group (%x) {kind = "contraction"} ... {
^bb0(%a: tensor<4x65536xf32>):
  %c = nn.constant dense<1.0> : tensor<65536x65536xf32>   // still one element
  %m = nn.matmul %a, %c : ...
  fusion.yield %m : ...
}
```

`group-each-op` does this for every group before scheduling (so a library
GEMM is never chosen for an operand that is not an array), and code
generation again for groups a custom pipeline made.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import StringAttr, TensorType
from xdsl.ir import Operation

from fusec.analysis.group_kind import LIBRARY_BACKEND, group_backend
from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.analysis.rewriting import copy_location
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp
from fusec.dialects.nn_base import numpy_to_dense, splat_value, tensor_shape
from fusec.dialects.shapes import numel

# Readers, by group kind, that the emitter evaluates one point at a time
# (through `operand_reader.read_at`: a matmul's or window op's operands).
_POINT_READERS: dict[str, tuple[OpKind, ...]] = {
    "contraction": (OpKind.CONTRACTION,),
    "window": (OpKind.WINDOW,),
    "reduction": (OpKind.REDUCTION,),
}


def is_splat(op: Operation) -> bool:
    """`op` is an `nn.constant` of more than one element, all equal."""
    return isinstance(op, nn.ConstantOp) and numel(tensor_shape(op.result)) > 1 and \
        splat_value(op.value) is not None


def _readable(group: GroupOp, reader: Operation) -> bool:
    """Whether the emitter of `group` reads a literal operand of `reader`."""
    kind = op_kind(reader)
    if kind == OpKind.ELEMENTWISE:
        return True
    attr = group.attributes.get("kind")
    group_kind = attr.data if isinstance(attr, StringAttr) else ""
    if group_backend(group) == LIBRARY_BACKEND:
        return False  # a library call reads its operands from memory
    return kind in _POINT_READERS.get(group_kind, ())


def _inside_copy(owner: nn.ConstantOp) -> nn.ConstantOp:
    """A copy of splat `owner`, stored as its one element."""
    t = owner.result.type
    assert isinstance(t, TensorType)
    value = splat_value(owner.value)
    assert value is not None
    copy = nn.ConstantOp.create(
        result_types=[t],
        attributes={**owner.attributes,
                    "value": numpy_to_dense(np.broadcast_to(value, t.get_shape()), t)})
    copy.result.name_hint = owner.result.name_hint
    copy_location(owner, copy)
    return copy


def inline_splat_inputs(group: GroupOp) -> None:
    """Move each splat constant input of `group` (more than one element) that
    every reader inside reads as a literal into its body: one copy before
    the first elementwise reader, and one before each matmul or window op
    (its own prologue, apart from an epilogue's). The outside constant goes
    when nothing else reads it."""
    for index in reversed(range(len(group.inputs))):
        owner = group.inputs[index].owner
        if not isinstance(owner, nn.ConstantOp) or not is_splat(owner):
            continue
        arg = group.block.args[index]
        order = {op: k for k, op in enumerate(group.block.ops)}
        readers = sorted({use.operation for use in arg.uses}, key=order.__getitem__)
        if not readers or not all(_readable(group, r) for r in readers):
            continue
        pointwise = [r for r in readers if op_kind(r) == OpKind.ELEMENTWISE]
        shares = [pointwise] if pointwise else []
        for group_of_readers in [*shares, *([r] for r in readers if r not in pointwise)]:
            # Before its first reader, so that a kernel keeps its name.
            inside = _inside_copy(owner)
            group.block.insert_op_before(inside, group_of_readers[0])
            for reader in group_of_readers:
                reader.operands = [inside.result if v is arg else v for v in reader.operands]
        group.operands = [v for i, v in enumerate(group.operands) if i != index]
        group.block.erase_arg(arg)
        if not owner.result.uses:
            owner.detach()
            owner.erase()
