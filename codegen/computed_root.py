"""Loads of a view whose root the kernel computes: a chain of slices,
reshapes and transposes over an elementwise op of the same group, or over a
chain of them (`x * k -> relu`; `analysis/view_operands.computed_ops`),
reads no buffer of that op's result; the ops are evaluated at the source
element the view's index names.

The head split of a biased QKV projection (`%qkv = nn.add %mm, %b`, then
slice, reshape and transpose) loads, for view index `f` into `[S, 3 * H * D]`,
`mm[f] + b[f % (3 * H * D)]`: operands of the root's shape are read at `f`,
broadcast ones at the coordinates `f` unravels to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.ir import BlockArgument, SSAValue

from fusec.analysis.group_body import GroupBody
from fusec.analysis.index_types import index_type
from fusec.codegen.kernel_source import broadcast_index, unravel_into
from fusec.codegen.point_evaluator import PointEvaluator, load_expr
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import Shape, numel

Load = Callable[[GroupBody, BlockArgument, str], str]
"""Writes the load of a group input at an index (`load_expr`, or a vector
access's `codegen/lane_loads.LaneLoads.load`)."""


def root_load(body: GroupBody, root: SSAValue, index: str, name: str,
              load_at: Load = load_expr) -> tuple[list[str], str]:
    """The lines and the expression that read element `index` of `root` (a
    group input, or an elementwise op's result computed here); `name`
    prefixes the variables. The coordinates are unravelled in uint32 where
    the root fits (`kernel_source.unravel_into`: a 64-bit division by a
    constant costs several times the instructions of a 32-bit one);
    `load_at` writes each load."""
    if isinstance(root, BlockArgument):
        return [], load_at(body, root, index)
    shape = tensor_shape(root)
    itype = index_type(numel(shape))
    flat = f"{name}_f"
    coords = [f"{name}_c{d}" for d in range(len(shape))]
    lines = unravel_into(f"{itype}({flat})", shape, coords,
                         [f"{name}_r{d}" for d in range(len(shape))], itype)

    def load(arg: BlockArgument, arg_shape: Shape, at: Sequence[str]) -> str:
        if tuple(arg_shape) == tuple(shape):  # the root's own elements: the index itself
            return load_at(body, arg, flat)
        return load_at(body, arg, broadcast_index(arg_shape, shape, at, itype))

    ev = PointEvaluator(body, shape, coords, loader=load, suffix=f"_{name}")
    value = ev.value(root)
    # coordinates no operand reads are dead code NVVM drops
    return [f"{flat} = {index}", *lines, *ev.take_lines()], value
