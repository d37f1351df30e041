"""Loads of a view whose root the kernel computes: a chain of slices,
reshapes and transposes over an elementwise op of the same group
(`analysis/view_operands.computed_root`) reads no buffer of that op's
result; the op is evaluated at the source element the view's index names.

The head split of a biased QKV projection (`%qkv = nn.add %mm, %b`, then
slice, reshape and transpose) loads, for view index `f` into `[S, 3 * H * D]`,
`mm[f] + b[f % (3 * H * D)]`: operands of the root's shape are read at `f`,
broadcast ones at the coordinates `f` unravels to.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import BlockArgument, SSAValue

from fusec.codegen.group_body import GroupBody, PointEvaluator, load_expr
from fusec.codegen.kernel_source import int_literal
from fusec.codegen.pointwise_index import index_type
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import Shape, numel


def root_load(body: GroupBody, root: SSAValue, index: str, name: str
              ) -> tuple[list[str], str]:
    """The lines and the expression that read element `index` of `root` (a
    group input, or an elementwise op's result computed here); `name`
    prefixes the variables. The coordinates are unravelled in uint32 where
    the root fits (a 64-bit division by a constant costs several times the
    instructions of a 32-bit one)."""
    if isinstance(root, BlockArgument):
        return [], load_expr(body, root, index)
    shape = tensor_shape(root)
    itype = index_type(numel(shape))

    def lit(value: int) -> str:
        return f"{itype}({int_literal(value)})"

    flat = f"{name}_f"
    lines: list[str] = []
    coords: list[str] = []
    for d, n in enumerate(shape):
        inner = 1
        for m in shape[d + 1:]:
            inner *= m
        expr = f"{itype}({flat})" if inner == 1 else f"({itype}({flat}) // {lit(inner)})"
        expr = expr if d == 0 else f"{expr} % {lit(n)}"
        coords.append(f"{name}_c{d}")
        lines.append(f"{coords[-1]} = {expr}")

    def load(arg: BlockArgument, arg_shape: Shape, at: Sequence[str]) -> str:
        if tuple(arg_shape) == tuple(shape):  # the root's own elements: the index itself
            return load_expr(body, arg, flat)
        offset, stride, terms = len(shape) - len(arg_shape), 1, []
        for d in range(len(arg_shape) - 1, -1, -1):  # right-aligned, as broadcasting is
            if arg_shape[d] != 1:
                c = at[d + offset]
                terms.append(c if stride == 1 else f"{c} * {lit(stride)}")
            stride *= arg_shape[d]
        return load_expr(body, arg, " + ".join(terms) or lit(0))

    ev = PointEvaluator(body, shape, coords, loader=load, suffix=f"_{name}")
    value = ev.value(root)
    body_lines = ev.take_lines()
    used = [line for line in lines if any(line.split(" = ")[0] in b for b in body_lines)]
    return [f"{flat} = {index}", *used, *body_lines], value  # only the coordinates it reads
