"""One launch for the pointwise kernels that read slices of one tensor.

A split (`nn.slice`s of one value that cover it, each with its own
pointwise consumers, as a model or `torch.split` writes it) forms one
pointwise group per slice: their iteration shapes differ, so no group holds
two of them. Each group reads only its own slice, so together they read the
tensor once; launched one by one they still pay a launch and a partial last
wave each. Here they become **one kernel**, one segment of blocks per group
(as a concat's operands get in `scheduling/concat_segments.py`): segment `k`
runs group `k`'s flat schedule (`pointwise_transpose.flat_lines`) as an
inlined device function on the blocks `[first_k, first_k + blocks_k)`, and
writes group `k`'s results. A block compares `blockIdx.x` with literal
bounds once, so no warp diverges over segments.

Which groups run as one launch is decided in `scheduling/split_plan.py`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import SSAValue

from fusec.codegen.kernel_source import (
    KernelParam,
    KernelSource,
    int_literal,
    launch_text,
    sanitize_identifier,
)
from fusec.codegen.pointwise_transpose import flat_lines
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import fmt, numel
from fusec.scheduling.transposed_plan import TransposedPlan

_INDENT = "    "


def emit(groups: Sequence[GroupOp], plans: Sequence[TransposedPlan],
         kernel_name: str) -> tuple[KernelSource, list[SSAValue]]:
    """The kernel of `groups` (a set of `scheduling/split_plan.split_launches`)
    planned as `plans`, named `kernel_name`, and the value each of its
    parameters binds."""
    inputs = list(dict.fromkeys(v for g in groups for v in g.inputs))
    outputs = [v for g in groups for v in g.outputs]
    threads = plans[0].threads
    units: list[str] = []
    calls: list[str] = []
    first = 0
    for k, (g, plan) in enumerate(zip(groups, plans, strict=True)):
        blocks = -(-numel(plan.shape) // (plan.threads * plan.unroll))
        seg = f"{kernel_name}_s{k}"
        units += ["@cuda.jit(device=True, inline=True)",
                  f"def {seg}(blk, {plan.body.signature()}):",
                  *(_INDENT + line for line in flat_lines(plan, "blk")), "", ""]
        block = "cuda.blockIdx.x" if not first else (
            f"cuda.blockIdx.x - {int_literal(first)}")
        args = [f"in{inputs.index(v)}" for v in g.inputs]
        args += [f"out{outputs.index(v)}" for v in g.outputs]
        first += blocks
        head = ("else:" if k == len(groups) - 1 else
                f"{'if' if k == 0 else 'elif'} cuda.blockIdx.x < {int_literal(first)}:")
        calls += [f"{head}  # {_name(g)}: iteration shape {fmt(plan.shape)}",
                  f"{_INDENT}{seg}({block}, {', '.join(args)})"]
    grid, block_dims = (first, 1, 1), (threads, 1, 1)
    per_thread = (f"{plans[0].unroll} elements per thread, {threads} apart, one segment of "
                  f"blocks per group ({', '.join(_name(g) for g in groups)})")
    ops = [op for g in groups for op in g.block.ops if not isinstance(op, YieldOp)]
    header = [f"# {'+'.join(_name(g) for g in groups)} (pointwise, one launch for the "
              f"slices of one value), {len(ops)} ops:",
              "#   " + ", ".join(op.name for op in ops),
              f"# launch: {launch_text(grid, block_dims, per_thread)}"]
    params = [f"in{j}" for j in range(len(inputs))] + [f"out{j}" for j in range(len(outputs))]
    text = "\n".join([*units, *header, "@cuda.jit",
                      f"def {kernel_name}({', '.join(params)}):",
                      *(_INDENT + line for line in calls)])
    kernel_params = [KernelParam("input", j, (max(1, numel(tensor_shape(v))),))
                     for j, v in enumerate(inputs)]
    kernel_params += [KernelParam("output", j, (max(1, numel(tensor_shape(v))),))
                      for j, v in enumerate(outputs)]
    source = KernelSource(kernel_name, text + "\n", grid, block_dims, kernel_params,
                          shared_bytes=0, notes=[f"pointwise, {per_thread}"])
    return source, [*inputs, *outputs]


def _name(group: GroupOp) -> str:
    """The group's name, sanitized (it may come from the model's text)."""
    name = group.attributes.get("name")
    return sanitize_identifier(name.data, "g") if isinstance(name, StringAttr) else "group"
