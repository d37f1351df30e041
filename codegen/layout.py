"""The emitter of `layout` groups: transpose, slice, concat, gather, a plain
copy for a reshape that must materialize, and a chain of slices, reshapes and
transposes (`analysis/view_chains.py`) copied through its composed strided view.

The group is collapsed first (`codegen/layout_collapse.py`: a transpose of
`[2, 3, 4]` by `perm = [2, 0, 1]` is a 2-d transpose of `[6, 4]`, a concat
along axis 1 of `[N, C_k, H, W]` a concat of `[N, C_k * H * W]`), then
emitted as a pointwise group whose one op is read in place
(`codegen/pointwise_transpose.py`), under the pointwise schedule
`analysis/schedule_choice.py` gives it: several elements per thread, indices in
uint32 while every array fits, and, for a transpose that moves the
innermost axis, the shared-memory tile so that reads and writes are both
coalesced.

```mlir
%y = fusion.group (%x) {name = "g0", kind = "layout"}
    : (tensor<4x8xf32>) -> tensor<8x4xf32> {
^bb0(%a: tensor<4x8xf32>):
  %t = nn.transpose %a {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  fusion.yield %t : tensor<8x4xf32>
}
```

`nn.gather` wraps negative indices once (as `numpy.take`) and clamps any
index still outside the table to its first or last entry: a kernel cannot
raise, and reading outside the table would be undefined behaviour. The
reference interpreter reports such an index as an error instead, so results
differ only for programs that are already wrong.
"""

from __future__ import annotations

import dataclasses
import itertools

from xdsl.ir import Operation

from fusec.analysis.diagnostics import op_error
from fusec.analysis.view_operands import CHAINED_VIEWS, computed_root
from fusec.codegen import pointwise_transpose
from fusec.codegen.kernel_source import KernelSource, UnsupportedTypeError, value_dtype
from fusec.codegen.layout_collapse import collapsed_group
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp, YieldOp

_LAYOUT_OPS = (nn.TransposeOp, nn.SliceOp, nn.ConcatOp, nn.GatherOp, nn.ReshapeOp)


def _the_ops(group: GroupOp) -> list[Operation]:
    """The layout op of the group (or its chain of slices, reshapes and
    transposes, each reading the one before), or a located error."""
    ops = [op for op in group.block.ops if not isinstance(op, YieldOp)]
    inside = set(ops)
    # an elementwise op whose result only the chain reads is evaluated at the
    # element the chain's view reads (`codegen/computed_root.py`), with the
    # splat constants it reads as literals (moved in by `group-each-op`)
    literals = [op for op in ops if isinstance(op, nn.ConstantOp) and all(
        computed_root(u.operation, inside) for u in op.results[0].uses)]
    ops = [op for op in ops if op not in literals]
    roots = [op for op in ops[:1] if computed_root(op, inside)]
    ops = ops[len(roots):]
    chain = len(ops) > 1 and all(isinstance(op, CHAINED_VIEWS) for op in ops)
    if not ops or not (chain or (len(ops) == 1 and isinstance(ops[0], _LAYOUT_OPS))):
        names = ", ".join(op.name for op in ops) or "no op"
        raise op_error(group, "a layout group must hold one layout op or a chain of slices, "
                       f"reshapes and transposes, got {names}")
    terminator = group.block.last_op
    assert isinstance(terminator, YieldOp)
    links = all(op.operands[0] is prev.results[0] for prev, op in itertools.pairwise(ops))
    if list(terminator.values) != list(ops[-1].results) or not links or any(
        operand.owner is not group.block and operand.owner not in roots
        for operand in ops[0].operands
    ) or (roots and not chain):
        raise op_error(group, "a layout group must read its inputs and yield its op's result"
                       + (" (each op of a chain reading the one before)" if chain else ""))
    try:
        for v in (*ops[0].operands, *(r for op in ops for r in op.results)):
            value_dtype(v)
    except UnsupportedTypeError as err:
        raise op_error(ops[0], str(err)) from None
    return ops


def collapsed(group: GroupOp) -> GroupOp:
    """The checked layout `group` as a detached pointwise-view group over its
    collapsed shapes (what both the scheduler and the emitter read); a chain
    as it is (the pointwise emitter reads its composed view and merges the
    axes the view steps across alike)."""
    ops = _the_ops(group)
    return collapsed_group(group, ops[0]) if len(ops) == 1 else group


def emit(group: GroupOp, kernel_name: str) -> KernelSource:
    """Generate the kernel of layout `group`, named `kernel_name`, under its
    `#fusion.pointwise` schedule."""
    ops = _the_ops(group)
    kernel = pointwise_transpose.emit(collapsed(group), kernel_name)
    how = kernel.notes[0].removeprefix("pointwise, ")
    names = " -> ".join(op.name for op in ops)
    return dataclasses.replace(kernel, notes=[f"layout ({names}), {how}"])
