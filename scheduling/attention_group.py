"""An attention group's sizes and its recorded tile: the pattern it must
hold (`find_pattern`), its sizes (`AttentionSizes`, `group_shape`: what the
schedule is chosen for), the tile checked against the target
(`checked_tile`) and the register estimate of its kernel
(`group_registers`). The attention writers (`codegen/attention*.py`)
render the kernel from them.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import BlockArgument

from fusec.analysis.attention_pattern import AttentionPattern, match_attention
from fusec.analysis.decompose_group import decomposed
from fusec.analysis.diagnostics import op_error
from fusec.analysis.group_body import GroupBody
from fusec.analysis.strided_view import StridedView
from fusec.analysis.targets import Target
from fusec.dialects import nn
from fusec.dialects.element_types import element
from fusec.dialects.fusion import GroupOp
from fusec.dialects.nn_base import element_type, element_type_name, tensor_shape
from fusec.dialects.shapes import Shape, numel
from fusec.scheduling.attention_schedule import (
    AttentionShape,
    AttentionTile,
    attention_registers,
    recorded_tile,
)
from fusec.scheduling.register_estimate import RegisterEstimate


def find_pattern(body: GroupBody) -> AttentionPattern:
    """The attention of a group body, which must hold nothing else."""
    for op in body.ops:
        found = match_attention(op, lambda o: o.name)
        if found is None:
            continue
        if not isinstance(found, AttentionPattern):
            raise op_error(body.group, f"cannot generate this attention group: {found.reason}")
        extra = [o for o in body.ops if o not in found.ops() and not isinstance(o, nn.ConstantOp)]
        if extra or body.outputs != [found.output]:
            raise op_error(body.group, "an attention group must hold one attention and "
                           "nothing else, and yield its output")
        for which in ("q", "k", "v"):
            if not isinstance(found.source(which), BlockArgument):
                raise op_error(body.group, f"the {which} operand of an attention group must "
                               "be a group input or a view of one")
        return found
    raise op_error(body.group, "an attention group must hold softmax(f(Q @ K^T)) @ V")


def checked_tile(group: GroupOp, target: Target) -> AttentionTile:
    """The recorded tile (`analysis/schedule_choice.py` records one on every
    attention group before code generation: the emitter chooses nothing),
    checked against `target`."""
    tile = recorded_tile(group)
    if tile is None:
        raise op_error(group, "attention group has no #fusion.attention schedule "
                       "(tile-and-promote records one)")
    if (problem := tile.problem(target)) is not None:
        raise op_error(group, f"attention tile {tile.text()} is invalid: {problem}")
    return tile


def group_tile(group: GroupOp, target: Target) -> tuple[AttentionTile, AttentionSizes, int]:
    """The recorded tile of an attention group (checked against `target`),
    its sizes and its kernel's parameter count."""
    with decomposed(group) as flat:
        body = GroupBody.of(flat)
        shape = AttentionSizes.of(find_pattern(body))
    return checked_tile(group, target), shape, len(body.args) + 1


def group_shape(group: GroupOp) -> AttentionShape:
    """The sizes of an attention group (what its schedule is chosen for)."""
    with decomposed(group) as flat:
        body = GroupBody.of(flat)
        shape = AttentionSizes.of(find_pattern(body))
    return shape.sizes(len(body.args) + 1)


def group_registers(group: GroupOp, target: Target) -> RegisterEstimate:
    """The register estimate of an attention group's kernel on `target`."""
    tile, shape, params = group_tile(group, target)
    return attention_registers(tile, shape.d, shape.dv, params)


def matrix_batch(view: StridedView) -> bool:
    """Whether `view` is a whole buffer read as a batch of row-major
    matrices, or of transposed ones: what a library batched GEMM takes in
    place (`scheduling/gemm_choice.library_matmul`: operands read directly
    or transposed)."""
    if view.offset:
        return False

    def row_major(shape: list[int], strides: list[int]) -> bool:
        dense = StridedView.contiguous(shape).strides  # an axis of 1 has any stride
        return all(n == 1 or s == c for n, s, c in zip(shape, strides, dense, strict=True))

    shape, strides = list(view.shape), list(view.strides)
    if row_major(shape, strides):
        return True
    if len(shape) < 2:
        return False
    shape[-2:], strides[-2:] = shape[:-3:-1], strides[:-3:-1]
    return row_major(shape, strides)


@dataclass(frozen=True)
class AttentionSizes:
    """Sizes of one attention: batch (x heads), queries, keys, head dims,
    and the operands' element type."""

    batch: Shape
    s: int
    skv: int
    d: int
    dv: int
    element: str = "f32"
    relayout: tuple[str, ...] = ()  # `AttentionShape.relayout`

    @property
    def out(self) -> Shape:
        return (*self.batch, self.s, self.dv)

    def sizes(self, params: int) -> AttentionShape:
        return AttentionShape(max(1, numel(self.batch)), self.s, self.skv, self.d, self.dv,
                              params, element(self.element).width, self.element, self.relayout)

    @staticmethod
    def of(p: AttentionPattern) -> AttentionSizes:
        scores = tensor_shape(p.qk.result)
        views = {which: p.source_view(which) for which in ("q", "k", "v")}
        views["out"] = p.output_view()
        return AttentionSizes(scores[:-2], scores[-2], scores[-1], tensor_shape(p.qk.lhs)[-1],
                              tensor_shape(p.pv.rhs)[-1], element_type_name(element_type(p.qk.lhs)),
                              tuple(w for w, view in views.items() if not matrix_batch(view)))


def attention_shape(p: AttentionPattern, params: int) -> AttentionShape:
    """The sizes of a matched attention whose kernel has `params` parameters."""
    return AttentionSizes.of(p).sizes(params)
