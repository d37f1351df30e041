"""The body of a `fusion.group` as the planners and the writers read it: its
ops in program order, its inputs (block arguments) and its outputs (yielded
values), each value named (`a<k>` for inputs, `v<k>` for op results), and the
types its values are stored and computed in.

```mlir
%y = fusion.group (%x, %b) {kind = "contraction"} : (...) -> tensor<4x8xf32> {
^bb0(%xa: tensor<4x6xf32>, %wa: tensor<6x8xf32>, %ba: tensor<8xf32>):
  %m = nn.matmul %xa, %wa : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %s = nn.add %m, %ba : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  fusion.yield %s : tensor<4x8xf32>
}
```

`GroupBody.of(group)` holds `[%m, %s]`, the inputs `%xa, %wa, %ba` (`a0`,
`a1`, `a2`) and the output `%s` (`v1`). Code generation writes point code
from it (`codegen/point_evaluator.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.ir import BlockArgument, Operation, SSAValue

from fusec.analysis import device_dtypes
from fusec.analysis.diagnostics import op_error
from fusec.analysis.op_kinds import OpKind
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.shapes import Shape

# Op kinds a point evaluator computes: elementwise ops and nn.broadcast_to.
POINT_KINDS = (OpKind.ELEMENTWISE, OpKind.BROADCAST)


def dtype_name(value: SSAValue) -> str:
    """NumPy dtype name of a tensor value's device buffer (`float32`, `bool`,
    `uint16` for bf16 bits, ...)."""
    try:
        return device_dtypes.value_dtype(value)
    except device_dtypes.UnsupportedTypeError as err:
        raise op_error(owner_of(value), str(err)) from None


def storage_type(value: SSAValue) -> str:
    """The numba type name an element of `value` is stored as."""
    return device_dtypes.numba_type(dtype_name(value))


def compute_type(value: SSAValue) -> str:
    """The numba type name `value` is computed in (half precision widens)."""
    return device_dtypes.compute_type(dtype_name(value))


def owner_of(value: SSAValue) -> Operation:
    """The op that defines `value`: its op, or the op whose block takes it."""
    if isinstance(value, BlockArgument):
        parent = value.block.parent_op()
        assert parent is not None
        return parent
    assert isinstance(value.owner, Operation)
    return value.owner


@dataclass
class GroupBody:
    """The ops of a group in program order, its inputs and its outputs."""

    group: GroupOp
    ops: list[Operation]
    args: list[BlockArgument]
    outputs: list[SSAValue]  # yielded values, output i is outputs[i]
    names: dict[SSAValue, str] = field(default_factory=dict[SSAValue, str])
    # one-element inputs a kernel reads once at its start into a variable,
    # by name (`codegen/point_evaluator.hold_scalars`): later reads name it
    held: dict[BlockArgument, str] = field(default_factory=dict[BlockArgument, str])

    @staticmethod
    def of(group: GroupOp) -> GroupBody:
        """Collect the body of `group` and name every value."""
        ops = [op for op in group.block.ops if not isinstance(op, YieldOp)]
        last = group.block.last_op
        assert isinstance(last, YieldOp)
        body = GroupBody(group, ops, list(group.block.args), list(last.values))
        for k, arg in enumerate(body.args):
            body.names[arg] = f"a{k}"
        for k, op in enumerate(ops):
            for r in op.results:
                body.names[r] = f"v{k}"
        return body

    def signature(self) -> str:
        """The kernel's parameter list: `in0, in1, out0`."""
        names = [f"in{k}" for k in range(len(self.args))]
        names += [f"out{k}" for k in range(len(self.outputs))]
        return ", ".join(names)

    def arg_index(self, arg: BlockArgument) -> int:
        """The group operand number of a block argument."""
        return self.args.index(arg)


def fits_domain(shape: Shape, domain: Shape) -> bool:
    """Whether `shape` broadcasts (right-aligned) into `domain` unchanged."""
    if len(shape) > len(domain):
        return False
    offset = len(domain) - len(shape)
    return all(s in (1, domain[d + offset]) for d, s in enumerate(shape))
