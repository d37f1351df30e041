"""Reading one element of a fused op's operand through its prologue.

A matmul (or window op) operand may be computed inside the group from group
inputs by elementwise ops, `nn.broadcast_to` and `nn.transpose`, e.g. the
transposed weight of an ONNX Gemm:

```mlir
^bb0(%x: tensor<4x6xf32>, %w: tensor<8x6xf32>):
  %wt = nn.transpose %w {perm = [1, 0]} : (tensor<8x6xf32>) -> tensor<6x8xf32>
  %y = nn.matmul %x, %wt : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
```

`read_at(body, %wt, ["k", "n"], "_b0")` writes `a1_b0 = in1[n * 6 + k]` and
returns `a1_b0`: each value is evaluated at coordinates of its own shape, a
transpose permutes the coordinates, broadcasting drops size-1 ones. The
caller guards the coordinates (tiles past the edge read nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.ir import BlockArgument, Operation, SSAValue

from fusec.analysis.group_body import GroupBody, compute_type
from fusec.codegen.kernel_source import broadcast_index, int_literal, scalar_expr, unravel
from fusec.codegen.point_evaluator import constant_literal, load_expr
from fusec.dialects import nn
from fusec.dialects.nn_base import tensor_shape

# (group input, its coordinates) -> the expression of that element, or None
# for the ordinary load (a staging writer reading some inputs as wide words)
ArgLoader = Callable[[BlockArgument, tuple[str, ...]], "str | None"]


def read_at(
    body: GroupBody, value: SSAValue, coords: Sequence[str], suffix: str,
    loader: ArgLoader | None = None,
) -> tuple[list[str], str]:
    """Lines computing `value` at `coords` (one per dimension of its shape,
    variable names or `0`) and the expression holding it; `loader`, when
    given, may supply a group input's element instead of its load."""
    lines: list[str] = []
    memo: dict[tuple[SSAValue, tuple[str, ...]], str] = {}

    def at(v: SSAValue, cs: tuple[str, ...]) -> str:
        key = (v, cs)
        if key in memo:
            return memo[key]
        if isinstance(v, BlockArgument) and v in body.held:  # read once, no line
            memo[key] = body.held[v]
            return body.held[v]
        name = body.names[v] + suffix + ("" if not memo else f"_{len(memo)}")
        if isinstance(v, BlockArgument):
            given = loader(v, cs) if loader is not None else None
            if given is None:
                index = broadcast_index(tensor_shape(v), tensor_shape(v), cs)
                given = load_expr(body, v, index)
            lines.append(f"{name} = {given}")
        else:
            op = v.owner
            assert isinstance(op, Operation)
            name = _op_at(_Step(body, at, name, lines), op, v, cs)
        memo[key] = name
        return name

    return lines, at(value, tuple(coords))


Reader = Callable[[SSAValue, tuple[str, ...]], str]


@dataclass
class _Step:
    """What evaluating one op needs: the body, the recursive reader, the
    name of its result and the lines being written."""

    body: GroupBody
    at: Reader
    name: str
    lines: list[str]


def _op_at(step: _Step, op: Operation, v: SSAValue, cs: tuple[str, ...]) -> str:
    at, name, lines = step.at, step.name, step.lines
    if isinstance(op, nn.ConstantOp):
        return constant_literal(op)
    if isinstance(op, nn.TransposeOp):
        src = [""] * len(cs)
        for d, p in enumerate(op.perm):
            src[p] = cs[d]  # result dimension d is operand dimension perm[d]
        return at(op.operands[0], tuple(src))
    if isinstance(op, nn.SliceOp):
        return at(op.operands[0], tuple(
            f"({int_literal(s)} + {c} * {int_literal(st)})"
            for c, s, st in zip(cs, op.starts, op.strides, strict=True)
        ))
    if isinstance(op, nn.ReshapeOp):
        return _reshape_at(step, op, v, cs)
    shape = tensor_shape(v)
    args = [at(o, _broadcast_coords(tensor_shape(o), shape, cs)) for o in op.operands]
    if isinstance(op, nn.BroadcastToOp):
        return args[0]
    ctype = compute_type(op.operands[0] if isinstance(op, nn.CmpOp) else v)
    lines.append(f"{name} = {scalar_expr(op, args, ctype)}")
    return name


def _reshape_at(step: _Step, op: nn.ReshapeOp, v: SSAValue, cs: tuple[str, ...]) -> str:
    """A reshape keeps the row-major order: the same flat index, unravelled
    in the operand's shape (a group input is read at the flat index)."""
    shape = tensor_shape(v)
    flat = f"{step.name}_flat"
    step.lines.append(f"{flat} = {broadcast_index(shape, shape, cs)}")
    src = op.operands[0]
    if isinstance(src, BlockArgument):
        step.lines.append(f"{step.name} = {load_expr(step.body, src, flat)}")
        return step.name
    unravel_lines, names = unravel(flat, tensor_shape(src), prefix=f"{step.name}_i")
    step.lines.extend(unravel_lines)
    return step.at(src, tuple(names))


def _broadcast_coords(
    shape: Sequence[int], out_shape: Sequence[int], cs: Sequence[str]
) -> tuple[str, ...]:
    """Coordinates of an operand of `shape` broadcast (right-aligned) to
    `out_shape`: size-1 dimensions read index 0."""
    offset = len(out_shape) - len(shape)
    return tuple("0" if shape[d] == 1 else cs[d + offset] for d in range(len(shape)))
