"""What the pointwise and reduction writers can read in place: the one
source of the rules both fusion legality and the writers apply.

A pointwise or reduction kernel reads a slice, reshape, transpose, concat
or gather in place instead of a copy kernel writing it
(`analysis/view_operands.py`, `analysis/transposed_operands.py`). Whether
it can depends on what the rest of the kernel computes: a gather reads its
table only from memory, a pointwise kernel transposes only an operand it
reads from memory. The writers (`codegen/pointwise_transpose.py`,
`scheduling/reduction_plan.py`) refuse a group that breaks these rules; fusion
legality asks the same predicates before it merges two groups
(`fusion_legality.fuse_infos`) and before a group recomputes a value another
group writes (`recompute_read_refusal`), so that it never forms a group the
writers refuse. `form-fusion-groups` checks every group it built once more
with `group_read_refusal` and splits one that still breaks them.

```mlir
%c = nn.exp %x : tensor<2x2xf32>
%g = nn.gather %c, %i {axis = 0} : (tensor<2x2xf32>, tensor<2xi64>) -> tensor<2x2xf32>
%s = nn.reduce_sum %g {axes = [0]} : (tensor<2x2xf32>) -> tensor<2xf32>
```

A reduction kernel holding all three would read the gather of a value it
computes: `reduction_read_refusal` says so, and `%c` stays a kernel's
output that the reduction kernel reads from memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation, SSAValue

from fusec.analysis.candidate_group import detached_group
from fusec.analysis.transposed_operands import tile_axes, transpose_refusal
from fusec.analysis.view_operands import (
    CHAINED_VIEWS,
    INDEXED_READS,
    feeds_indexed_reads,
    indexed_refusal,
    is_chain_end,
    operand_view,
    view_refusal,
)
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import ShapeError, broadcast_shapes, fmt

POINTWISE_WRITTEN = ("pointwise", "layout", "view")
"""Group kinds the pointwise writer emits (`view`: legality's name of a
chain of layout ops, a `layout` group once formed)."""

Refusal = tuple[Operation, str]
"""The op a writer would point at, and why it cannot emit the group."""


def pointwise_read_refusal(ops: Sequence[Operation], shape: Sequence[int]) -> str | None:
    """Why a pointwise kernel over `shape` holding `ops` cannot read its
    layout ops in place, or None: its transposes (`transpose_refusal`), its
    slices, reshapes, concats and gathers (`view_refusal`), and a concat or
    gather beside a transposed operand (read on the flat schedule only, not
    on the tiled one)."""
    reason = transpose_refusal(ops, shape) or view_refusal(ops, shape, maps=True)
    if reason is None and any(isinstance(op, INDEXED_READS) for op in ops) and tile_axes(
            ops, shape) is not None:
        reason = ("a concat or gather is read on the flat schedule only, not beside a "
                  "transposed operand staged through a tile")
    return reason


def is_reduction_leaf(op: Operation, inside: set[Operation]) -> bool:
    """Whether a reduction kernel holding `inside` reads layout op `op`'s
    result in place as a leaf of its row values: a concat or gather, or the
    end of a chain of slices, reshapes and transposes that feeds no concat
    or gather."""
    return isinstance(op, INDEXED_READS) or (
        isinstance(op, CHAINED_VIEWS) and is_chain_end(op, inside)
        and not feeds_indexed_reads(op, inside))


def reduction_leaf_refusal(op: Operation, inside: set[Operation],
                           shape: Sequence[int]) -> str | None:
    """Why a reduction kernel over input shape `shape` holding `inside`
    cannot read leaf `op` (`is_reduction_leaf`) in place, or None: its
    operands must be read from memory, and its result must broadcast into
    the rows."""
    if isinstance(op, INDEXED_READS):
        refusal = indexed_refusal(op, inside)
    else:
        found = operand_view(op, inside)
        refusal = found if isinstance(found, str) else None
    if refusal is not None:
        return f"cannot read {op.name} in a reduction kernel: {refusal}"
    result = tensor_shape(op.results[0])
    if not _fits(result, tuple(shape)):
        return (f"{op.name} has shape {fmt(result)}, which does not broadcast into the "
                f"reduction's input shape {fmt(shape)}")
    return None


def reduction_read_refusal(ops: Sequence[Operation], shape: Sequence[int]) -> Refusal | None:
    """The first leaf of a reduction kernel over input shape `shape`
    holding `ops` that it cannot read in place, and why; None when it can
    read them all."""
    inside = set(ops)
    for op in ops:
        if is_reduction_leaf(op, inside) and (
                reason := reduction_leaf_refusal(op, inside, shape)) is not None:
            return op, reason
    return None


def group_read_refusal(group: GroupOp) -> Refusal | None:
    """Why the writer of `group`'s kind cannot read its layout ops in place,
    or None (also for the kinds other than pointwise, reduction and
    layout). A layout group is written as a pointwise group whose ops are
    read in place (`codegen/layout.py`)."""
    kind = group.attributes.get("kind")
    kind_name = kind.data if isinstance(kind, StringAttr) else ""
    ops = [op for op in group.block.ops if not isinstance(op, YieldOp)]
    if kind_name in POINTWISE_WRITTEN and any(
            isinstance(op, (*CHAINED_VIEWS, *INDEXED_READS)) for op in ops):
        last = group.block.last_op
        assert isinstance(last, YieldOp)
        try:
            shape = broadcast_shapes(*(tensor_shape(v) for v in last.values))
        except ShapeError:
            return None  # the writer's own error names the shapes
        reason = pointwise_read_refusal(ops, shape)
        return (group, f"cannot generate this pointwise group: {reason}") if reason else None
    if kind_name == "reduction":
        reductions = [op for op in ops if isinstance(op, nn.ReduceOp)]
        if reductions:
            return reduction_read_refusal(ops, reductions[0].operand_shape())
    return None


def recompute_read_refusal(kind: str, ops: Iterable[Operation], outputs: Iterable[SSAValue],
                           order: dict[Operation, int]) -> str | None:
    """Why a group of `kind` holding `ops` (its members and the ops it
    would recompute, in any order; `order`: each op's program position)
    and writing `outputs` could not be emitted, or None. Judged on a
    detached copy, so that each op's readers are the ones it would have in
    that group (a recomputed op is read only by the group's ops)."""
    members = sorted(set(ops), key=order.__getitem__)
    results = {r for op in members for r in op.results}
    written = [v for v in outputs if v in results]
    with detached_group(members, kind, written) as group:
        found = group_read_refusal(group)
    return None if found is None else found[1]


def _fits(shape: tuple[int, ...], domain: tuple[int, ...]) -> bool:
    """Whether `shape` broadcasts (right-aligned) into `domain` unchanged."""
    offset = len(domain) - len(shape)
    return offset >= 0 and all(s in (1, domain[d + offset]) for d, s in enumerate(shape))
