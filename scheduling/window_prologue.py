"""Legality of an elementwise prologue in a window group: a pointwise group
computing a conv's or pool's input joins the window group, whose kernel
evaluates it on each element it stages (`codegen/window_tiled.py`, through
`codegen/operand_reader.py`), so the input is read once and the value the
pointwise group wrote is neither written nor read back.

```mlir
%a = nn.add %x, %b : (tensor<2x8x9x9xf32>, tensor<2x1x1x1xf32>) -> tensor<2x8x9x9xf32>
%y = nn.conv2d %a, %w {strides = [2, 2], groups = 8} : (...) -> tensor<2x8x4x4xf32>
```

is one kernel (`kind = "window"`, the add evaluated as the halo tile is
staged). A block's halo tile overlaps its neighbours' (the rows and columns
a window reaches past the block's own outputs): those elements are staged,
and the prologue evaluated, once per block that stages them. The cost check
prices that recomputation from the tiled plan the group would get: the
prologue's flops per element times the staged elements beyond one per
input element, which must stay within `max_recompute_flops` per element
(the limit recomputed elementwise chains have, `passes/recompute_chain.py`).
"""

from __future__ import annotations

from xdsl.ir import Operation, OpResult, SSAValue

from fusec.analysis.fusion_legality import Candidate, GroupInfo, Merged, describe_group
from fusec.analysis.group_body import POINT_KINDS
from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.analysis.targets import Target
from fusec.dialects import nn
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import numel
from fusec.scheduling.window_plan import TiledWindow, geometry
from fusec.scheduling.window_schedule import default_plan, fit_shared

WINDOW_OPS = (nn.Conv2dOp, nn.MaxPool2dOp, nn.AvgPool2dOp)


def staging_factor(op: Operation, target: Target) -> float:
    """Input elements a tiled kernel of window `op` stages per element of
    its input (at least 1: the halos of neighbouring blocks overlap; a
    conv's blocks of output channels each stage the input again), under
    the plan `tile-and-promote` would start from on `target`."""
    geo = geometry(op)
    start = TiledWindow(geo, default_plan(geo))
    tiled = fit_shared(start, target.static_shared_limit, target) or start
    gx, gy, gz = tiled.grid
    staged = tiled.input_elements * tiled.steps * gx * gy * gz
    return max(1.0, staged / max(1, numel(tensor_shape(op.operands[0]))))


def window_prologue(c: Candidate, win: GroupInfo, ew: GroupInfo) -> Merged | str:
    """`ew` (pointwise) as the prologue of the lone window op of `win`, or
    why not (see the module docstring)."""
    op = win.anchor
    # a conv + pool kernel computes its conv tile from the input as it is
    if not isinstance(op, WINDOW_OPS) or sum(isinstance(o, WINDOW_OPS) for o in win.ops) != 1:
        return (f"{describe_group(c.dep, ew)} would be a prologue of a conv + pool group, "
                "whose kernel reads its input directly")
    # the window kernel runs the prologue only on the staged input elements
    x = op.operands[0]
    for v in c.edges(ew, win):
        readers = [u for u in c.dep.consumers(v) if c.in_pair(u)]
        if v is not x or any(u is not op for u in readers):
            reader = next((u for u in readers if u is not op), op)
            return (f"{describe_group(c.dep, ew)} feeds {c.dep.describe(reader)}; a window "
                    f"kernel evaluates a prologue only on the input of {c.dep.describe(op)} "
                    "it stages")
    # its values live only in registers: none may be read outside
    if (kept := next((v for v in c.outputs if _owned(c, v, ew)), None)) is not None:
        reader = next(u for u in c.dep.consumers(kept) if not c.in_pair(u))
        return (f"{describe_group(c.dep, ew)} is also read by {c.dep.describe(reader)} "
                f"outside the group; a window kernel evaluates its prologue only where it "
                f"stages the input of {c.dep.describe(op)}, and writes none of it")
    # elementwise ops and broadcasts only: `operand_reader` evaluates them per element
    if (odd := next((o for o in ew.ops if op_kind(o) not in (*POINT_KINDS, OpKind.CONSTANT)),
                    None)) is not None:
        return (f"{c.dep.describe(odd)} cannot be evaluated per staged element as a prologue "
                f"of {c.dep.describe(op)} (elementwise ops only)")
    # the cost check: halo elements staged by several blocks recompute it
    per_element = ew.flops / max(1, numel(ew.shape))
    extra = per_element * (staging_factor(op, c.target) - 1.0)
    if extra > c.options.max_recompute_flops:
        return (f"{describe_group(c.dep, ew)} would be recomputed on overlapping halo tiles "
                f"at {extra:.3g} flops per input element, over max_recompute_flops = "
                f"{c.options.max_recompute_flops}")
    return ("window", win.shape, (), op)


def _owned(c: Candidate, v: SSAValue, g: GroupInfo) -> bool:
    return isinstance(v, OpResult) and c.graph.node_of.get(v.op) == g.nid
