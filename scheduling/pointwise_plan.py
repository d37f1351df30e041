"""A pointwise group's plan (`plan_group`): the group checked, its
dimensions collapsed, each input and result's access, and how many halves
a thread moves per access (`vector_width`, `wide_arrays`). The register
model sizes the kernel from it; the pointwise writer
(`codegen/pointwise.py`, whose docstring tells the kernel) renders it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from fusec.analysis.collapsed_dims import collapse_dims
from fusec.analysis.device_dtypes import UnsupportedTypeError, value_dtype
from fusec.analysis.diagnostics import op_error
from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.dialects import nn, shapes
from fusec.dialects.element_types import of_device_dtype
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.nn_base import splat_value, tensor_shape

_POINTWISE_KINDS = (OpKind.ELEMENTWISE, OpKind.BROADCAST)

HALF_ACCESS_BYTES = 8
"""Bytes a thread moves per access of an f16/bf16 array (4 halves; 2 where
the innermost extent or elements per thread forbid 4): a warp request of
one half per thread moves 64 bytes, too few to reach the copy floor."""


@dataclass(frozen=True)
class PointwiseAccess:
    """How the kernel reaches one group input or result."""

    name: str  # the kernel parameter
    shape: tuple[int, ...]  # collapsed, same rank as the iteration shape
    dtype: str

    @property
    def numel(self) -> int:
        return shapes.numel(self.shape)


@dataclass
class PointwisePlan:
    """Everything decided before the text is written."""

    group: GroupOp
    ops: list[Operation]
    results: list[SSAValue]
    iter_shape: tuple[int, ...]  # collapsed
    inputs: list[PointwiseAccess]
    outputs: list[PointwiseAccess]
    unroll: int = 1  # elements per thread (the schedule's `elements_per_thread`)
    threads: int = 1  # threads per block (the schedule's `block`)
    vector: int = 1  # consecutive elements per access (halves read wide)

    @property
    def numel(self) -> int:
        return shapes.numel(self.iter_shape)

    def is_full(self, access: PointwiseAccess) -> bool:
        return access.shape == self.iter_shape

    def needs_coords(self) -> bool:
        """Whether the loop needs coordinates (unravel): for an input neither
        full nor a scalar (hoisted), or a result smaller than the iteration
        shape (its store is guarded by coordinates)."""
        return any(not self.is_full(a) and a.numel != 1 for a in self.inputs) or any(
            not self.is_full(a) for a in self.outputs
        )


def _check_group(group: GroupOp, ops: list[Operation]) -> None:
    for op in ops:
        if isinstance(op, nn.ConstantOp):
            # A splat constant inside a group is a literal; other constants
            # stay outside as group inputs.
            if splat_value(op.value) is None:
                raise op_error(op, "only splat constants can be inside a pointwise group")
        elif op_kind(op) not in _POINTWISE_KINDS:
            raise op_error(op, f"'{op.name}' cannot be generated in a pointwise group")
    try:
        for v in (*group.block.args, *(r for op in ops for r in op.results)):
            value_dtype(v)
    except UnsupportedTypeError as err:
        raise op_error(group, str(err)) from None


def _channel_shape(op: nn.BatchNormOp) -> tuple[int, ...]:
    """The shape a `[C]` batch-norm parameter is read with: `[C, 1, ..., 1]`
    right-aligned against the input, so NumPy broadcasting puts C on axis 1."""
    x_shape = op.operand_shape()
    return (x_shape[1],) + (1,) * (len(x_shape) - 2)


def load_shapes(group: GroupOp) -> list[tuple[int, ...]]:
    """The shape each group input is indexed with: its own, except for the
    parameters of `nn.batch_norm` (read along dimension 1, not by NumPy rules),
    which must be group inputs used only as such parameters."""
    out = [tensor_shape(a) for a in group.block.args]
    for arg in group.block.args:
        bn_uses = [u for u in arg.uses if isinstance(u.operation, nn.BatchNormOp) and u.index]
        if not bn_uses:
            continue
        shapes_seen = {_channel_shape(u.operation) for u in bn_uses}  # pyright: ignore
        if len(bn_uses) != len(list(arg.uses)) or len(shapes_seen) != 1:
            raise op_error(bn_uses[0].operation, "a batch_norm parameter in a pointwise group "
                           "must be a group input used only as a per-channel parameter")
        out[arg.index] = shapes_seen.pop()
    for op in group.block.ops:
        if isinstance(op, nn.BatchNormOp) and any(
            v.owner is not group.block for v in op.operands[1:]
        ):
            raise op_error(op, "batch_norm parameters computed inside a pointwise group "
                           "cannot be read per channel; run 'decompose' first")
    return out


def plan_group(group: GroupOp) -> PointwisePlan:
    """Check the group, collapse its dimensions, choose the schedule."""
    ops = [op for op in group.block.ops if not isinstance(op, YieldOp)]
    _check_group(group, ops)
    terminator = group.block.last_op
    assert isinstance(terminator, YieldOp)
    results = list(terminator.values)
    in_shapes = load_shapes(group)
    out_shapes = [tensor_shape(r) for r in results]
    try:
        full = shapes.broadcast_shapes(*out_shapes)
        for s in in_shapes:
            if shapes.broadcast_shapes(s, full) != full:
                raise shapes.ShapeError(f"input {shapes.fmt(s)} is larger than the results")
    except shapes.ShapeError as err:
        raise op_error(group, f"pointwise group results do not share one shape: {err}") from None
    iter_shape, collapsed = collapse_dims(full, [*in_shapes, *out_shapes])
    inputs = [
        PointwiseAccess(f"in{i}", collapsed[i], value_dtype(a))
        for i, a in enumerate(group.block.args)
    ]
    outputs = [
        PointwiseAccess(f"out{i}", collapsed[len(inputs) + i], value_dtype(r))
        for i, r in enumerate(results)
    ]
    return PointwisePlan(group, ops, results, iter_shape, inputs, outputs)


def vector_width(plan: PointwisePlan) -> int:
    """Halves per wide access: the most (up to `HALF_ACCESS_BYTES`) that
    divide both the elements per thread and the innermost extent (so the
    lanes of an access share every coordinate but the last), when some
    f16/bf16 array is full along that extent; else 1."""
    if not plan.iter_shape or not any(
        is_half(a) and a.shape[-1] == plan.iter_shape[-1] and a.numel > 1
        for a in (*plan.inputs, *plan.outputs)
    ):
        return 1
    lanes = HALF_ACCESS_BYTES // 2
    while lanes > 1 and (plan.unroll % lanes or plan.iter_shape[-1] % lanes):
        lanes //= 2
    return lanes


def is_half(access: PointwiseAccess) -> bool:
    return of_device_dtype(access.dtype).is_half


def along_inner(plan: PointwisePlan, access: PointwiseAccess) -> bool:
    """Whether `access` varies along the innermost extent (its lanes are
    consecutive elements); true of everything in a 0-d iteration space."""
    return not plan.iter_shape or access.shape[-1] == plan.iter_shape[-1]


def is_wide(plan: PointwisePlan, access: PointwiseAccess) -> bool:
    """Whether `access` is read or written wide: a half array, contiguous
    along the innermost extent (its lanes are consecutive elements)."""
    return (plan.vector > 1 and is_half(access) and access.numel > 1
            and along_inner(plan, access))


def wide_arrays(plan: PointwisePlan) -> list[str]:
    """The parameters moved in words (`plan.vector` lanes per access)."""
    return [a.name for a in (*plan.inputs, *plan.outputs) if is_wide(plan, a)]
