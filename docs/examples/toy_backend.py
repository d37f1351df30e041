"""A toy backend, `toy`: pointwise groups as naive kernels, one thread per
element, no loop, no vector access; the pass `use-toy-backend` chooses it for
every pointwise group (docs/adding-a-backend.md walks through it).

Load it without installing anything:

    fusec model.mlir --load-pass-plugin docs/examples/toy_backend.py \\
        --insert-after tile-and-promote=use-toy-backend -o out

Loading the file registers the writer (backend "toy", kind "pointwise") and
gives fusec the pass; the pass records `backend = "toy"` on each pointwise
group after the schedules are chosen, and code generation writes those
groups with this writer. The rest of the program keeps fusec's own kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from fusec.analysis.device_dtypes import compute_type, value_dtype
from fusec.analysis.group_kind import BACKEND_ATTR
from fusec.codegen.kernel_source import (
    KernelParam,
    KernelSource,
    broadcast_index,
    scalar_expr,
    unravel,
)
from fusec.codegen.pointwise import splat_literal
from fusec.codegen.writers import WriteTask, Written, register_writer
from fusec.dialects import nn
from fusec.dialects.element_types import of_device_dtype
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import numel

TOY = "toy"
THREADS = 128  # threads per block


class ToyPointwiseWriter:
    """Backend "toy", kind "pointwise": thread `i` computes element `i` of
    every result, reading each input at its broadcast index."""

    backend = TOY
    kind = "pointwise"

    def write(self, task: WriteTask) -> Written:
        """The kernel of `task.group`; an op or a type it has no code for is
        a `NotImplementedError`, which fusec reports at the group."""
        group = task.group
        shape = tensor_shape(group.outputs[0])
        if any(tensor_shape(r) != shape for r in group.outputs):
            raise NotImplementedError("the toy backend writes results of one shape only")
        for v in (*group.block.args, *group.outputs):
            if of_device_dtype(value_dtype(v)).widen:
                raise NotImplementedError("the toy backend has no half precision")
        n = numel(shape)
        unravel_lines, coords = unravel("i", shape, "c")
        lines = ["i = cuda.grid(1)", f"if i >= {n}:", "    return", *unravel_lines]
        names: dict[SSAValue, str] = {}
        for k, arg in enumerate(group.block.args):
            names[arg] = f"a{k}"
            lines.append(f"a{k} = in{k}[{broadcast_index(tensor_shape(arg), shape, coords)}]")
        terminator = group.block.last_op
        assert isinstance(terminator, YieldOp)
        for j, op in enumerate(o for o in group.block.ops if o is not terminator):
            lines.append(f"t{j} = {_expr(op, names)}")
            names[op.results[0]] = f"t{j}"
        lines += [f"out{k}[i] = {names[v]}" for k, v in enumerate(terminator.operands)]
        params = [f"in{k}" for k in range(len(group.inputs))] + \
            [f"out{k}" for k in range(len(group.outputs))]
        text = "\n".join([f"# {task.group_name}: toy backend, one thread per element",
                          "@cuda.jit", f"def {task.kernel_name}({', '.join(params)}):",
                          *("    " + line for line in lines)]) + "\n"
        blocks = -(-n // THREADS)
        return KernelSource(
            task.kernel_name, text, (blocks, 1, 1), (THREADS, 1, 1),
            [KernelParam("input", k, (numel(tensor_shape(v)),))
             for k, v in enumerate(group.inputs)]
            + [KernelParam("output", k, (n,)) for k in range(len(group.outputs))])


def _expr(op: object, names: dict[SSAValue, str]) -> str:
    """One element of `op`'s result, from its operands' names."""
    if isinstance(op, nn.ConstantOp):
        literal = splat_literal(op)
        if literal is None:
            raise NotImplementedError("the toy backend reads splat constants only")
        return literal
    if not isinstance(op, nn.NNOp) or len(op.results) != 1:
        raise NotImplementedError(f"the toy backend has no code for {getattr(op, 'name', op)}")
    typed = op.operands[0] if isinstance(op, nn.CmpOp) else op.results[0]
    try:
        return scalar_expr(op, [names[v] for v in op.operands], compute_type(value_dtype(typed)))
    except NotImplementedError:
        raise NotImplementedError(f"the toy backend has no code for {op.name}") from None


register_writer(ToyPointwiseWriter())


@dataclass(frozen=True)
class UseToyBackend(ModulePass):
    """Run every pointwise group on the toy backend (`backend = "toy"`)."""

    name = "use-toy-backend"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for group in op.walk():
            kind = group.attributes.get("kind")
            if isinstance(group, GroupOp) and kind == StringAttr("pointwise"):
                group.attributes[BACKEND_ATTR] = StringAttr(TOY)
