"""What a reduction group computes, seen as rows: the analysis behind
`codegen/reduction.py`.

A reduction group reduces one shape `X` over one set of axes `R` (all its
reductions agree on both), possibly with elementwise ops before (prologue)
and after (epilogue). Decomposed softmax is the model case:

```mlir
%m = nn.reduce_max %x {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
%d = nn.sub %x, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
%e = nn.exp %d : tensor<4x8xf32>
%s = nn.reduce_sum %e {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
%y = nn.div %e, %s : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
```

A *row* is one point of the kept axes; its elements are the points of `R`.
Every value is classified:
- its *frame*: `X` (broadcasts into the reduced shape, evaluated at full
  coordinates) or `K` (downstream of a `keepdims = false` reduction,
  evaluated at the kept coordinates only);
- whether it *varies along the row* (then it is evaluated per element inside
  a pass over the row) or is one number per row (evaluated once);
- its *stage*: how many reductions lie on its longest use-def chain. Stage-s
  reductions are accumulated in pass s over the row; `%m` above is stage 1,
  `%s` stage 2, and `%y` is written in a final pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from xdsl.ir import BlockArgument, Operation, SSAValue

from fusec.analysis.diagnostics import op_error
from fusec.analysis.group_body import POINT_KINDS, GroupBody, fits_domain
from fusec.analysis.group_memo import planned
from fusec.analysis.in_place_reads import is_reduction_leaf, reduction_leaf_refusal
from fusec.analysis.op_kinds import op_kind
from fusec.analysis.view_operands import CHAINED_VIEWS, READ_IN_PLACE, computed_root
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import Shape, fmt, numel

Frame = Literal["X", "K"]


@dataclass
class RowAnalysis:
    """The row view of a reduction group (see the module docstring)."""

    body: GroupBody
    reductions: list[nn.ReduceOp]
    shape: Shape  # X: the shape every reduction reads
    axes: tuple[int, ...]  # R: the reduced axes, sorted
    frame: dict[SSAValue, Frame] = field(default_factory=dict[SSAValue, Frame])
    stage: dict[SSAValue, int] = field(default_factory=dict[SSAValue, int])
    varying: dict[SSAValue, bool] = field(default_factory=dict[SSAValue, bool])

    @property
    def kept(self) -> tuple[int, ...]:
        """The axes that are not reduced."""
        return tuple(d for d in range(len(self.shape)) if d not in self.axes)

    @property
    def kept_shape(self) -> Shape:
        return tuple(self.shape[d] for d in self.kept)

    @property
    def reduce_shape(self) -> Shape:
        return tuple(self.shape[d] for d in self.axes)

    @property
    def rows(self) -> int:
        return numel(self.kept_shape)

    @property
    def row_length(self) -> int:
        return numel(self.reduce_shape)

    @property
    def trailing(self) -> bool:
        """Whether the reduced axes are the trailing ones (rows are contiguous)."""
        return self.axes == tuple(range(len(self.shape) - len(self.axes), len(self.shape)))

    @property
    def stages(self) -> int:
        """The number of passes that accumulate reductions."""
        return max(self.stage[r.result] for r in self.reductions)

    def frame_domain(self, frame: Frame) -> Shape:
        return self.shape if frame == "X" else self.kept_shape

    def arg_varies(self, arg: BlockArgument) -> bool:
        """Whether a group input, read in frame X, differs along the row."""
        return self.spans_row(arg)

    def spans_row(self, v: SSAValue) -> bool:
        """Whether `v`, in frame X, has more than one element along the
        reduced axes. Such an output is stored element by element even when
        its value is one number per row (softmax of a row broadcast from
        one number: `value_varies` is false, yet every element is written)."""
        shape = tensor_shape(v)
        offset = len(self.shape) - len(shape)
        return any(shape[a - offset] != 1 for a in self.axes if a >= offset)

    def stored_per_element(self, v: SSAValue) -> bool:
        """Whether output `v` is written in the final pass over the row
        (else once per row, by lane 0)."""
        return self.frame.get(v, "X") == "X" and self.spans_row(v)

    def value_varies(self, v: SSAValue) -> bool:
        """Whether `v` (in frame X) must be evaluated per row element."""
        if isinstance(v, BlockArgument):
            return self.arg_varies(v)
        return self.varying.get(v, False)

    def varying_args(self, roots: list[SSAValue]) -> list[SSAValue]:
        """The row-varying group inputs that evaluating `roots` per element
        reads (values constant along the row are hoisted and not followed);
        a concat, gather or view read in place counts as an input."""
        seen: set[SSAValue] = set()
        found: list[SSAValue] = []
        stack = list(reversed(roots))
        while stack:
            v = stack.pop()
            if v in seen or not self.value_varies(v):
                continue
            seen.add(v)
            if isinstance(v, BlockArgument) or isinstance(v.owner, READ_IN_PLACE):
                found.append(v)
            else:
                assert isinstance(v.owner, Operation)
                stack.extend(reversed(v.owner.operands))
        return found


def _check_reductions(body: GroupBody) -> list[nn.ReduceOp]:
    reductions = [op for op in body.ops if isinstance(op, nn.ReduceOp)]
    if not reductions:
        raise op_error(body.group, "a reduction group must contain an nn.reduce_* op")
    first = reductions[0]
    for r in reductions[1:]:
        if r.operand_shape() != first.operand_shape() or r.axes != first.axes:
            raise op_error(
                r,
                f"reductions of one kernel must share their input shape and axes: "
                f"{r.name} reduces {fmt(r.operand_shape())} over {list(r.axes)}, "
                f"{first.name} reduces {fmt(first.operand_shape())} over {list(first.axes)}",
            )
    return reductions


def analyze(body: GroupBody) -> RowAnalysis:
    """Classify every op of a reduction group, or raise a located error for a
    group this code generator cannot run as one row-wise kernel."""
    reductions = _check_reductions(body)
    ra = RowAnalysis(body, reductions, reductions[0].operand_shape(), reductions[0].axes)
    inside = set(body.ops)
    for op in body.ops:
        if isinstance(op, nn.ReduceOp):
            _classify_reduction(ra, op)
        elif isinstance(op, nn.ConstantOp):
            ra.stage[op.results[0]] = 0
        elif computed_root(op, inside):
            continue  # evaluated where its views read it (`codegen/computed_root.py`)
        elif op_kind(op) in POINT_KINDS:
            _classify_elementwise(ra, op)
        elif is_reduction_leaf(op, inside):
            _in_place_leaf(ra, op)
        elif not isinstance(op, CHAINED_VIEWS):
            raise op_error(op, f"{op.name} cannot be fused into a reduction kernel")
    for v in body.outputs:
        if isinstance(v, BlockArgument) and not fits_domain(tensor_shape(v), ra.shape):
            raise op_error(body.group, "a group input yielded as an output must fit the row domain")
    return ra


def analyze_group(group: GroupOp) -> RowAnalysis:
    """`analyze` of `group`'s body, once while the group is unchanged: the
    scheduler's analysis is the one its writer reads (`group_memo`)."""
    return planned("rows", group, lambda g: analyze(GroupBody.of(g)))


def _operand_frame(ra: RowAnalysis, v: SSAValue) -> Frame | None:
    return ra.frame.get(v) if not isinstance(v, BlockArgument) else None


def _classify_reduction(ra: RowAnalysis, op: nn.ReduceOp) -> None:
    src = op.operands[0]
    if _operand_frame(ra, src) == "K":
        raise op_error(op, "a reduction cannot read the result of a keepdims = false reduction")
    ra.stage[op.results[0]] = ra.stage.get(src, 0) + 1
    ra.frame[op.results[0]] = "X" if op.keepdims else "K"
    ra.varying[op.results[0]] = False


def _in_place_leaf(ra: RowAnalysis, op: Operation) -> None:
    """`op`'s result, read in place (a concat or gather at the row element's
    coordinates, `codegen/indexed_read.py`, or the strided view of a chain of
    slices, reshapes and transposes, `analysis/reduction_views.py`), as a
    leaf of the row's values like an input; or the reason it cannot be (the
    rule fusion legality applied when it formed the group), as an error."""
    refusal = reduction_leaf_refusal(op, set(ra.body.ops), ra.shape)
    if refusal is not None:
        raise op_error(op, refusal)
    result = op.results[0]
    ra.frame[result] = "X"
    ra.stage[result] = 0
    ra.varying[result] = ra.spans_row(result)


def _classify_elementwise(ra: RowAnalysis, op: Operation) -> None:
    frames = {_operand_frame(ra, v) for v in op.operands} - {None}
    frame: Frame = "K" if "K" in frames else "X"
    if frame == "K" and "X" in frames:
        raise op_error(
            op,
            f"{op.name} mixes a keepdims = false reduction result with row-shaped values; "
            "use keepdims = true",
        )
    shape = tensor_shape(op.results[0])
    domain = ra.frame_domain(frame)
    if not fits_domain(shape, domain):
        raise op_error(
            op,
            f"{op.name} has shape {fmt(shape)}, which does not broadcast into the "
            f"reduction's {'input' if frame == 'X' else 'result'} shape {fmt(domain)}",
        )
    result = op.results[0]
    ra.frame[result] = frame
    ra.stage[result] = max((ra.stage.get(v, 0) for v in op.operands), default=0)
    ra.varying[result] = frame == "X" and any(ra.value_varies(v) for v in op.operands)
