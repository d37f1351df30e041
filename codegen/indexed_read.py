"""Reading one element of a concat, a gather or a folded view in place.

A kernel that fuses `nn.concat` or `nn.gather` never materialises it: the
element at coordinates `cs` of the op's result is loaded straight from the
buffer that holds it.

- `nn.concat %a, %b {axis = 1}` of `[N, 256, H, W]` and `[N, 128, H, W]`:
  `(a[n, c, h, w] if c < 256 else b[n, c - 256, h, w])`; more operands by a
  chain of comparisons against literal offsets. Each operand is a group
  input or a chain of slices and reshapes of one (a strided view).
- `nn.gather %table, %ids {axis = 0}`: `table[clamp(ids[i, j]), k]`. As the
  layout kernel does (`codegen/layout.py`), a negative index counts from the
  end once and an index still outside the table is clamped to its first or
  last row: a kernel never reads outside the table.

```python
lines, expr = read_element(body, concat_result, ["c0", "c1"], Ints("uint32"), "x3")
# expr: (in0[c0 * 4 + c1] if c1 < uint32(4) else in1[c0 * 2 + uint32(c1 - uint32(4))])
```

Coordinates are those of the value's own shape (one per dimension, `0`
where the kernel broadcasts it); `Ints` types the literals and the
arithmetic like the kernel's other indices (uint32 below 2^31 elements).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import BlockArgument, Operation, SSAValue

from fusec.analysis.diagnostics import op_error
from fusec.analysis.group_body import GroupBody
from fusec.analysis.strided_view import StridedView
from fusec.analysis.view_operands import CHAINED_VIEWS, INDEXED_READS, operand_view
from fusec.codegen.computed_root import Load, root_load
from fusec.codegen.kernel_source import int_literal
from fusec.codegen.point_evaluator import load_expr
from fusec.dialects import nn
from fusec.dialects.nn_base import tensor_shape


@dataclass(frozen=True)
class Ints:
    """How index arithmetic is typed: `itype` (`uint32`, `uint64`) or, when
    None, numba's default int64."""

    itype: str | None = None

    def lit(self, value: int) -> str:
        """An integer literal of the index type."""
        return f"{self.itype}({int_literal(value)})" if self.itype else int_literal(value)

    def cast(self, expr: str) -> str:
        """`expr` converted to the index type (numba widens 32-bit sums)."""
        return f"{self.itype}({expr})" if self.itype else expr


def is_indexed(v: SSAValue) -> bool:
    """Whether `v` is the result of a concat or gather (read by `read_element`)."""
    return not isinstance(v, BlockArgument) and isinstance(v.owner, INDEXED_READS)


def read_element(body: GroupBody, value: SSAValue, coords: Sequence[str], ints: Ints,
                 name: str, load_at: Load = load_expr) -> tuple[list[str], str]:
    """Lines (a gather's index arithmetic, named from `name`) and the
    expression of `value`'s element at `coords`; `load_at` writes the loads
    of a gather's index and table (`codegen/lane_loads.py`)."""
    lines: list[str] = []
    return lines, _read(body, value, tuple(coords), ints, name, lines, load_at)


def _read(body: GroupBody, v: SSAValue, cs: tuple[str, ...], ints: Ints, name: str,
          lines: list[str], load_at: Load = load_expr) -> str:
    if isinstance(v, BlockArgument):
        return load_at(body, v, _index(StridedView.contiguous(tensor_shape(v)), cs, ints))
    op = v.owner
    assert isinstance(op, Operation)
    if isinstance(op, CHAINED_VIEWS):
        found = operand_view(op, set(body.ops))
        if isinstance(found, str):
            raise op_error(op, f"cannot read {op.name} in place: {found}")
        root, view = found
        if isinstance(root, BlockArgument):
            return load_at(body, root, _index(view, cs, ints))
        if not name:  # a concat's operand is one load
            raise op_error(op, f"cannot read {op.name} in place: not a group input")
        # an elementwise op of group inputs, evaluated at the element the view reads
        more, expr = root_load(body, root, _index(view, cs, ints), f"{name}_r", load_at)
        lines += more
        return expr
    if isinstance(op, nn.ConcatOp):
        if any(_computed(body, v) for v in op.inputs):
            return _select(body, op, cs, ints, name, lines)
        return _concat(body, op, cs, ints)
    if isinstance(op, nn.GatherOp):
        return _gather(body, op, cs, ints, name, lines, load_at)
    raise op_error(op, f"{op.name} cannot be read in place by a fused concat or gather; "
                   "their operands must be group inputs or slices and reshapes of them")


def _index(view: StridedView, cs: Sequence[str], ints: Ints) -> str:
    """`offset + c0 * s0 + ...` in the index type, size-1 dimensions left out."""
    terms = [ints.lit(view.offset)] if view.offset else []
    for c, n, s in zip(cs, view.shape, view.strides, strict=True):
        if n != 1 and s != 0:
            terms.append(c if s == 1 else f"{c} * {ints.lit(s)}")
    return " + ".join(terms) or ints.lit(0)


def _concat(body: GroupBody, op: nn.ConcatOp, cs: tuple[str, ...], ints: Ints) -> str:
    """The operand whose range along the axis holds the coordinate, by
    comparisons against literal offsets (empty operands own no range)."""
    axis, c = op.axis, cs[op.axis]
    pieces: list[tuple[SSAValue, int, int]] = []
    start = 0
    for v in op.inputs:
        width = tensor_shape(v)[axis]
        if width:
            pieces.append((v, start, width))
        start += width
    reads: list[tuple[str, int]] = []
    for v, first, width in pieces:
        local = c if first == 0 else ints.cast(f"{c} - {ints.lit(first)}")
        inner: list[str] = []
        expr = _read(body, v, (*cs[:axis], local, *cs[axis + 1:]), ints, "", inner)
        _plain(op, inner)
        reads.append((expr, first + width))
    expr = reads[-1][0]
    for read, end in reversed(reads[:-1]):
        expr = f"({read} if {c} < {ints.lit(end)} else {expr})"
    return expr


def _computed(body: GroupBody, v: SSAValue) -> bool:
    """Whether concat operand `v` is computed by the kernel (not one load
    of a group input through a chain of slices, reshapes and transposes)."""
    if isinstance(v, BlockArgument):
        return False
    op = v.owner
    assert isinstance(op, Operation)
    found = operand_view(op, set(body.ops)) if isinstance(op, CHAINED_VIEWS) else "computed"
    return isinstance(found, str) or not isinstance(found[0], BlockArgument)


def _select(body: GroupBody, op: nn.ConcatOp, cs: tuple[str, ...], ints: Ints, name: str,
            lines: list[str]) -> str:
    """A concat with operands the kernel computes: a branch per element on
    the coordinate along the axis, each arm evaluating its operand's
    expression at the coordinates local to the operand (only that arm's
    loads and arithmetic run), into `<name>_sel`."""
    from fusec.codegen.point_evaluator import indent  # it imports this module

    if not name:
        raise op_error(op, f"{op.name} with computed operands cannot be read here in place")
    axis, c, out = op.axis, cs[op.axis], f"{name}_sel"
    arms: list[tuple[str, list[str]]] = []
    start = 0
    for k, v in enumerate(op.inputs):
        width, first = tensor_shape(v)[axis], start
        start += width
        if not width:
            continue  # an empty operand owns no range
        local = c if first == 0 else ints.cast(f"{c} - {ints.lit(first)}")
        at = (*cs[:axis], local, *cs[axis + 1:])
        arm, value = _evaluate(body, v, at, ints, f"_{name}{k}")
        arms.append((f"{c} < {ints.lit(start)}", [*arm, f"{out} = {value}"]))
    for k, (cond, arm) in enumerate(arms):
        head = "else:" if k == len(arms) - 1 else f"{'if' if k == 0 else 'elif'} {cond}:"
        lines += [head, *indent(arm, 1)] if len(arms) > 1 else arm
    return out


def _evaluate(body: GroupBody, v: SSAValue, cs: tuple[str, ...], ints: Ints,
              suffix: str, load_at: Load = load_expr) -> tuple[list[str], str]:
    """The lines and value of concat operand `v` that the kernel computes,
    evaluated at `cs` (coordinates of `v`'s own shape); `load_at` writes its
    loads of group inputs."""
    from fusec.codegen.point_evaluator import PointEvaluator  # it imports this module

    ev = PointEvaluator(body, tensor_shape(v), cs, suffix=suffix, itype=ints.itype,
                        load_at=load_at)
    value = ev.value(v)
    return ev.take_lines(), value


def read_operand(body: GroupBody, op: nn.ConcatOp, k: int, coords: Sequence[str], ints: Ints,
                 name: str, load_at: Load = load_expr) -> tuple[list[str], str]:
    """Lines and the expression of operand `k` of concat `op` at `coords`,
    coordinates of that operand's own shape: what an element of the
    concat's result reads when the kernel already knows which operand holds
    it (`scheduling/concat_segments.py`), so no comparison is emitted.
    `load_at` writes the loads of group inputs (a vector access's lanes:
    `codegen/lane_loads.py`)."""
    v, cs = op.inputs[k], tuple(coords)
    if _computed(body, v):
        return _evaluate(body, v, cs, ints, f"_{name}{k}", load_at)
    lines: list[str] = []
    expr = _read(body, v, cs, ints, "", lines, load_at)
    _plain(op, lines)
    return lines, expr


def _plain(op: Operation, lines: list[str]) -> None:
    """A concat's operands and a gather's indices are single loads."""
    if lines:
        raise op_error(op, f"{op.name} reads a gather in place; its operands must be group "
                       "inputs or slices and reshapes of them")


def _gather(body: GroupBody, op: nn.GatherOp, cs: tuple[str, ...], ints: Ints, name: str,
            lines: list[str], load_at: Load) -> str:
    """Load the index, wrap a negative one once, clamp into the table, read."""
    table, indices = op.operands
    axis, rank = op.axis, len(tensor_shape(indices))
    size = tensor_shape(table)[axis]
    inner: list[str] = []
    idx = _read(body, indices, cs[axis:axis + rank], ints, "", inner, load_at)
    _plain(op, inner)
    loaded, raw, row = f"{name}_id", f"{name}_ix", f"{name}_row"
    # Each name assigned once, branch-free: numba's front end slows with
    # every conditional expression and every name defined twice (one of each
    # per element of an unrolled row; `codegen/branch_locals.py`).
    lines += [
        f"{loaded} = int64({idx})",
        f"{raw} = {loaded} + int64({int_literal(size)}) * int64({loaded} < int64(0))",
        f"{row} = {ints.cast(f'min(max({raw}, int64(0)), int64({int_literal(size - 1)}))')}",
    ]
    at = (*cs[:axis], row, *cs[axis + rank:])
    return _read(body, table, at, ints, name, lines, load_at)
