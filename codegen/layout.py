"""The emitter of `layout` groups: transpose, slice, concat, gather, a plain
copy for a reshape that must materialize, and a chain of slices, reshapes and
transposes (`analysis/view_chains.py`) copied through its composed strided view.

The group is collapsed first (`scheduling/layout_collapse.py`: a transpose of
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

from fusec.codegen import pointwise_transpose
from fusec.codegen.kernel_source import KernelSource
from fusec.scheduling.group_plan import GroupPlan
from fusec.scheduling.pointwise_group_plan import LayoutPlan


def emit(plan: GroupPlan, kernel_name: str) -> KernelSource:
    """Generate the kernel of a layout group, named `kernel_name`, as its
    plan (`scheduling/pointwise_group_plan.LayoutPlan`) says."""
    layout = plan.detail_of(LayoutPlan)
    ops = layout.ops
    kernel = pointwise_transpose.emit(layout.group, layout.transposed, kernel_name)
    how = kernel.notes[0].removeprefix("pointwise, ")
    names = " -> ".join(op.name for op in ops)
    return dataclasses.replace(kernel, notes=[f"layout ({names}), {how}"])
