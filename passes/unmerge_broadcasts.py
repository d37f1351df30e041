"""The `unmerge-broadcasts` pass: a reshape that merges a broadcast axis into
its neighbour (`repeat_kv` of grouped-query attention) is undone at its
readers, which broadcast instead.

Grouped-query attention repeats each of `Hkv` key/value heads over `G`
query heads: `reshape(broadcast_to(reshape(k)))`, `[B, Hkv, S, D]` to
`[B, Hkv, 1, S, D]` to `[B, Hkv, G, S, D]` to `[B, Hkv*G, S, D]`. The last
reshape merges an axis of stride 0 into the head axis, which no strided view
expresses, so it costs a copy kernel per operand. Every reader that
broadcasts on its own (elementwise ops, matmul batch axes) can instead work
on the split shape `[B, Hkv, G, S, D]` and read the unbroadcast
`[B, Hkv, 1, S, D]` in place; its other operands are reshaped to the split
shape (splitting an axis is always a strided view) and its result is
reshaped back (a merge of a fresh contiguous result, also a view):

```mlir
// before
%k1 = nn.reshape %k : (tensor<2x2x8x4xf32>) -> tensor<2x2x1x8x4xf32>
%k2 = nn.broadcast_to %k1 : (tensor<2x2x1x8x4xf32>) -> tensor<2x2x3x8x4xf32>
%k3 = nn.reshape %k2 : (tensor<2x2x3x8x4xf32>) -> tensor<2x6x8x4xf32>
%y = nn.add %x, %k3 : (tensor<2x6x8x4xf32>, tensor<2x6x8x4xf32>) -> tensor<2x6x8x4xf32>
// after `fusec -p unmerge-broadcasts,dce`
%k1 = nn.reshape %k : (tensor<2x2x8x4xf32>) -> tensor<2x2x1x8x4xf32>
%x_s = nn.reshape %x : (tensor<2x6x8x4xf32>) -> tensor<2x2x3x8x4xf32>
%y_s = nn.add %x_s, %k1 : (tensor<2x2x3x8x4xf32>, tensor<2x2x1x8x4xf32>) -> tensor<2x2x3x8x4xf32>
%y = nn.reshape %y_s : (tensor<2x2x3x8x4xf32>) -> tensor<2x6x8x4xf32>
```

The split form travels on: a reader of `%y` that can work split (an
elementwise op, a reduction with `keepdims` over an unmerged axis, a
softmax, a transpose, which moves the merged axes together, a matmul whose
merged axes are batch axes) is rewritten the same way, reading `%y_s`. So a
whole attention, `softmax(Q Kᵀ) V`, runs on `[B, Hkv, G, ...]` with K and V
broadcast along the batch axis `G`, which `fuse-attention` fuses into one
kernel reading K and V in place (head `h` reads K head `h // G`). A reader
that cannot work split keeps the merged value as it was. A `broadcast_to`
that expands nothing (a group of one) is dropped.

A second seed: a reshape that merges batch axes of a matmul operand,
`[B, H, S, D]` to `[B*H, S, D]`, the `bmm` form in which PyTorch's
decompositions write every 4-D matmul (attention's `Q Kᵀ` and `P V` in a
`torch.compile` graph). The matmul takes the operand unmerged, and a reshape
that splits a merged value back into the shape of its split form
(`[B*H, S, S]` to `[B, H, S, S]`) is that split value, so the whole attention
reaches `fuse-attention` on `[B, H, ...]` with no layout op in its way. A
matmul with one operand that such a reshape merged only with axes of extent 1
(the squeeze of a sliced V, `[1, B, H, S, D]` to `[B, H, S, D]`, read beside
probabilities that no reshape merged) stays as it is: unmerged, it would give
the probabilities a unit axis and a reshape between the two matmuls.

Scores that go through a split reshape, an add that broadcasts and a merge
back before the softmax (the shifted windows of timm's Swin: `[B*nW, H, S,
S]` to `[B, nW, H, S, S]`, plus a mask `[1, nW, 1, S, S]` per window, back
to `[B*nW, H, S, S]`) reach `fuse-attention` split throughout. After each
walk, a reshape that splits batch axes of a matmul's result (directly or
through elementwise ops that nothing else reads) moves above the matmul,
which computes on split operands (Q and Kᵀ reshaped to `[B, nW, H, ...]`,
the bias to `[1, 1, H, S, S]`: views). A reshape that merges batch axes of
a matmul's result (through elementwise ops: the merge back) seeds the next
walk, so the softmax and `P V` run split too, V reshaped to the same split.
Two operands split differently along one merged axis (`[B, nW]` and a
squeeze's `[1, B*nW]`, or `[B*nW, H]` and `[B, nW, H]`) are read in their
common refinement (`analysis/axis_splits.refine`).

Each walk over a function rewrites the readers it meets after a seed. Where
both seeds meet (Llama's grouped-query attention in a `torch.compile` graph:
repeat_kv, then the `bmm` form), the matmul that unmerging the `bmm` form
makes reads the repeat_kv seed but comes after it; the next walk takes it,
and the walks stop when one changes nothing (`MAX_WALKS` at most). A 4-layer
Llama lost 16 of its 79 launches: per layer, the copies that repeated K and
V over the query heads and the transposes before them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, IntegerType, ModuleOp, TensorType
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, Block, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from fusec.analysis.axis_splits import (
    Groups,
    Split,
    merge_groups,
    refine,
    same_split,
    split_shape,
)
from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.analysis.rewriting import copy_location
from fusec.dialects import nn
from fusec.dialects.nn_base import int_list, tensor_shape
from fusec.dialects.shapes import Shape, broadcast_shapes, numel


def _tensor(like: SSAValue, shape: Shape) -> TensorType[Attribute]:
    t = like.type
    assert isinstance(t, TensorType)
    return TensorType(t.element_type, shape)


MAX_WALKS = 4
"""Walks over a function at most (a repeat_kv behind a `bmm` form takes two)."""
MAX_CHAIN = 8
"""Elementwise ops at most between a matmul and a reshape of its result that
merges or splits its batch axes (`_matmul_chain`)."""


@dataclass
class _Unmerger:
    rewriter: Rewriter = field(default_factory=Rewriter)
    splits: dict[SSAValue, Split] = field(default_factory=dict[SSAValue, Split])
    merges: list[Operation] = field(default_factory=list[Operation])

    def run(self, block: Block) -> bool:
        """One walk over `block`; whether it changed anything."""
        changed = False
        for op in list(block.ops):
            if isinstance(op, nn.BroadcastToOp) and op.results[0].type == op.operands[0].type:
                # expands nothing (a group of one head): no copy either
                op.results[0].replace_all_uses_with(op.operands[0])
                self.rewriter.erase_op(op)
                changed = True
            elif isinstance(op, nn.ReshapeOp) \
                    and (seed := _seed(op) or _batch_seed(op)) is not None \
                    and all(_splittable(u.operation, seed) for u in op.results[0].uses):
                self.splits[op.results[0]] = seed
                self.merges.append(op)
            elif isinstance(op, nn.ReshapeOp) and (s := self.splits.get(op.operands[0])) \
                    is not None and tensor_shape(op.results[0]) == tensor_shape(s.value):
                # splits a merged value back into the split form it came from
                op.results[0].replace_all_uses_with(s.value)
                self.rewriter.erase_op(op)
                changed = True
            elif any(v in self.splits for v in op.operands):
                changed |= self._rewrite(op)
        for merge in self.merges:  # what only the rewritten readers read
            _erase_dead(merge)
        return changed

    def hoist(self, block: Block) -> bool:
        """Move each reshape of `block` that splits batch axes of a matmul's
        result (`_hoistable`) above the matmul: the matmul and the
        elementwise ops after it compute split, on split operands; whether
        one moved."""
        moved = False
        for op in list(block.ops):
            if isinstance(op, nn.ReshapeOp) and (chain := _hoistable(op)) is not None:
                self._hoist(op, chain)
                moved = True
        return moved

    def _hoist(self, split: nn.ReshapeOp, chain: list[Operation]) -> None:
        extents = tensor_shape(split.results[0])
        groups = merge_groups(extents, tensor_shape(split.operands[0]))
        assert groups is not None  # as _hoistable found
        merged: SSAValue | None = None  # the chain's last value, and its split form
        value: SSAValue | None = None
        for op in chain:
            operands: list[SSAValue] = []
            for v in op.operands:
                got = value if v is merged else \
                    self._operand(v, groups, _operand_extents(op, v, extents), op)
                assert got is not None  # as _hoistable found
                operands.append(got)
            new = self._create(op, operands, extents)
            hint = op.results[0].name_hint
            new.results[0].name_hint = f"{hint}_s" if hint else None
            copy_location(op, new)
            self.rewriter.insert_op(new, InsertPoint.before(op))
            merged, value = op.results[0], new.results[0]
        assert value is not None
        split.results[0].replace_all_uses_with(value)
        self.rewriter.erase_op(split)
        for op in reversed(chain):
            self.rewriter.erase_op(op)

    def _rewrite(self, op: Operation) -> bool:
        """Replace reader `op` by its split form; whether it could."""
        made = self._split_form(op)
        if made is None:
            return False
        new, extents, groups = made
        result = op.results[0]
        value = new.results[0]
        new.results[0].name_hint = f"{result.name_hint}_s" if result.name_hint else None
        back: list[Operation] = []
        if tensor_shape(value) != extents:  # broadcast only for readers that stay merged
            back.append(nn.BroadcastToOp.create(operands=[value],
                                                result_types=[_tensor(value, extents)]))
        back.append(nn.ReshapeOp.create(operands=[back[-1].results[0] if back else value],
                                        result_types=[result.type]))
        back[-1].results[0].name_hint = result.name_hint
        copy_location(op, new, *back)
        self.rewriter.insert_op([new, *back], InsertPoint.before(op))
        result.replace_all_uses_with(back[-1].results[0])
        self.rewriter.erase_op(op)
        self.splits[back[-1].results[0]] = Split(value, extents, groups)
        self.merges.append(back[-1])
        return True

    def _split_form(self, op: Operation) -> tuple[Operation, Shape, Groups] | None:
        """`op` on split operands: (the new op, its result's split extents and
        merged axes), or None when `op` cannot work split."""
        if isinstance(op, nn.TransposeOp):
            return self._transpose(op)
        if isinstance(op, nn.MatmulOp):
            return self._matmul(op)
        if isinstance(op, nn.ReduceOp | nn.SoftmaxOp | nn.LogSoftmaxOp):
            return self._along_axes(op)
        if _elementwise(op):
            return self._elementwise(op)
        return None

    def _reshape(self, value: SSAValue, shape: Shape, at: Operation) -> SSAValue:
        if tensor_shape(value) == shape:
            return value
        op = nn.ReshapeOp.create(operands=[value], result_types=[_tensor(value, shape)])
        op.results[0].name_hint = f"{value.name_hint}_s" if value.name_hint else None
        copy_location(at, op)
        self.rewriter.insert_op(op, InsertPoint.before(at))
        return op.results[0]

    def _aligned(self, s: Split, at: Operation) -> SSAValue:
        """`s.value` with as many axes as `s.extents` (leading ones added)."""
        shape = tensor_shape(s.value)
        return self._reshape(s.value, (1,) * (len(s.extents) - len(shape)) + shape, at)

    def _operand(self, v: SSAValue, groups: Groups, extents: Shape,
                 at: Operation) -> SSAValue | None:
        """`v` (aligned to the merged axes of `groups`) in the split form of
        `extents`, or None when it differs along a merged axis."""
        s = self.splits.get(v)
        if s is not None and same_split(s, groups, extents):
            return s.value
        shape = split_shape(tensor_shape(v), groups, extents)
        return None if shape is None else self._reshape(v, shape, at)

    def _common(self, values: list[SSAValue], out: Shape,
                drop: int = 0) -> tuple[Groups, Shape] | None:
        """The split axes of a result of shape `out` (all but its last `drop`
        axes) from its operands' splits: along each merged axis, the split
        they share or their common refinement (`refine`), None when there is
        none or no operand is split."""
        rank = len(out) - drop
        parts: list[list[int] | None] = [None] * rank
        for v in values:
            s = self.splits.get(v)
            if s is None or not s.merged():
                continue
            own = s.groups[:len(s.groups) - drop]
            if len(own) > rank or any(len(g) > 1 for g in s.groups[len(own):]):
                return None
            for i, g in zip(range(rank - len(own), rank), own, strict=True):
                whole = [s.extents[a] for a in g]
                if len(g) == 1:
                    continue  # an axis of the result's extent (or broadcast)
                if numel(whole) != out[i] or (got := refine(parts[i], whole)) is None:
                    return None
                parts[i] = got
        if all(p is None for p in parts):
            return None
        axes = [p or [n] for p, n in zip(parts, out, strict=False)]
        groups: list[tuple[int, ...]] = []
        for p in axes:
            start = sum(len(g) for g in groups)
            groups.append(tuple(range(start, start + len(p))))
        return tuple(groups), tuple(n for p in axes for n in p)

    def _create(self, op: Operation, operands: list[SSAValue], shape: Shape,
                attrs: dict[str, Attribute] | None = None) -> Operation:
        return type(op).create(operands=operands,
                               result_types=[_tensor(op.results[0], shape)],
                               attributes={**op.attributes, **(attrs or {})},
                               properties=dict(op.properties))

    def _elementwise(self, op: Operation) -> tuple[Operation, Shape, Groups] | None:
        common = self._common(list(op.operands), tensor_shape(op.results[0]))
        if common is None:
            return None
        groups, extents = common
        got = [self._operand(v, groups, extents, op) for v in op.operands]
        operands = [v for v in got if v is not None]
        if len(operands) != len(got):
            return None
        shape = broadcast_shapes(*[tensor_shape(v) for v in operands])
        return self._create(op, operands, shape), extents, groups

    def _along_axes(self, op: Operation) -> tuple[Operation, Shape, Groups] | None:
        """A reduction with `keepdims`, or a softmax, over unmerged axes that
        the split value holds whole (not broadcast)."""
        s = self.splits.get(op.operands[0])
        if s is None or not s.merged():
            return None
        if isinstance(op, nn.ReduceOp):
            if not op.keepdims:
                return None
            axes = op.axes
        else:
            assert isinstance(op, nn.SoftmaxOp | nn.LogSoftmaxOp)
            axes = (op.axis,)
        if any(len(s.groups[a]) > 1 for a in axes):
            return None
        value = self._aligned(s, op)
        small = tensor_shape(value)
        split_axes = [s.groups[a][0] for a in axes]
        if any(small[a] != s.extents[a] for a in split_axes):
            return None  # along a broadcast axis: the copies count
        if isinstance(op, nn.ReduceOp):
            shape = tuple(1 if k in split_axes else n for k, n in enumerate(small))
            extents = tuple(1 if k in split_axes else n for k, n in enumerate(s.extents))
            new = self._create(op, [value], shape, {"axes": int_list(split_axes)})
            return new, extents, s.groups
        axis = IntegerAttr(split_axes[0], IntegerType(64))
        return self._create(op, [value], small, {"axis": axis}), s.extents, s.groups

    def _transpose(self, op: nn.TransposeOp) -> tuple[Operation, Shape, Groups] | None:
        """The merged axes move together: each becomes its run of split axes."""
        s = self.splits[op.operands[0]]
        if not s.merged():
            return None
        perm = [a for p in op.perm for a in s.groups[p]]
        groups: list[tuple[int, ...]] = []
        for p in op.perm:
            start = sum(len(g) for g in groups)
            groups.append(tuple(range(start, start + len(s.groups[p]))))
        value = self._aligned(s, op)
        small = tensor_shape(value)
        new = self._create(op, [value], tuple(small[a] for a in perm), {"perm": int_list(perm)})
        return new, tuple(s.extents[a] for a in perm), tuple(groups)

    def _matmul(self, op: nn.MatmulOp) -> tuple[Operation, Shape, Groups] | None:
        """A matmul whose merged axes are batch axes, which broadcast."""
        out = tensor_shape(op.results[0])
        common = self._common(list(op.operands), out, drop=2)
        if common is None:
            return None
        groups, batch = common
        if not any(sum(batch[a] > 1 for a in g) > 1 for g in groups) and not all(
                v in self.splits for v in op.operands):
            # Split only by axes of extent 1 (a squeeze, `[1, B, H, S, D]` to
            # `[B, H, S, D]`): it merges nothing, and the other operand would
            # gain a unit axis and a reshape in front of it.
            return None
        rows = len(batch)
        operands: list[SSAValue] = []
        for v in op.operands:
            shape = tensor_shape(v)
            full = (*groups, (rows,), (rows + 1,))
            got = self._operand(v, full, (*batch, *shape[-2:]), op)
            if got is None:
                return None
            operands.append(got)
        shape = (*broadcast_shapes(*[tensor_shape(v)[:-2] for v in operands]), *out[-2:])
        return (self._create(op, operands, shape), (*batch, *out[-2:]),
                (*groups, (rows,), (rows + 1,)))


def _seed(op: nn.ReshapeOp) -> Split | None:
    """The split form of a reshape that merges an axis `broadcast_to`
    expanded with another one."""
    src = op.operands[0]
    bcast = src.op if isinstance(src, OpResult) else None
    if not isinstance(bcast, nn.BroadcastToOp):
        return None
    extents = tensor_shape(src)
    groups = merge_groups(extents, tensor_shape(op.results[0]))
    if groups is None:
        return None
    small = tensor_shape(bcast.operands[0])
    aligned = (1,) * (len(extents) - len(small)) + small
    expanded = {k for k, (a, b) in enumerate(zip(aligned, extents, strict=True)) if a != b}
    if not any(len(g) > 1 and expanded & set(g) for g in groups):
        return None
    return Split(bcast.operands[0], extents, groups)


def _batch_seed(op: nn.ReshapeOp) -> Split | None:
    """The split form of a reshape that merges batch axes of a matmul operand
    (`[B, H, M, K]` to `[B*H, M, K]`, PyTorch's `bmm` form of a 4-D matmul):
    the matmul broadcasts batch axes, so it can take them unmerged. Or a
    reshape that merges batch axes of a matmul's result (through elementwise
    ops: the merge back of scores computed split, `[B, nW, H, S, S]` to
    `[B*nW, H, S, S]`): its readers can work split as the matmul did."""
    extents = tensor_shape(op.operands[0])
    groups = merge_groups(extents, tensor_shape(op.results[0]))
    if groups is None or len(groups) < 3 or any(len(g) > 1 for g in groups[-2:]) \
            or not any(len(g) > 1 for g in groups[:-2]):
        return None
    if not any(isinstance(u.operation, nn.MatmulOp) for u in op.results[0].uses) \
            and _matmul_chain(op.operands[0], single_use=False) is None:
        return None
    return Split(op.operands[0], extents, groups)


def _splittable(reader: Operation, s: Split) -> bool:
    """Whether `reader` of the merged value of `s` can read its split form
    (by its kind and axes; its other operands are checked as it is
    rewritten). A seed with another reader stays merged: that reader and the
    split ones would share the unbroadcast value, which no group can then
    hold as a view."""
    if isinstance(reader, nn.TransposeOp):
        return True
    if isinstance(reader, nn.MatmulOp):
        return all(len(g) == 1 for g in s.groups[-2:])
    if isinstance(reader, nn.ReduceOp | nn.SoftmaxOp | nn.LogSoftmaxOp):
        axes = reader.axes if isinstance(reader, nn.ReduceOp) else (reader.axis,)
        return (not isinstance(reader, nn.ReduceOp) or reader.keepdims) and \
            all(len(s.groups[a]) == 1 for a in axes)
    return _elementwise(reader)


def _elementwise(op: Operation) -> bool:
    """Whether `op` is one elementwise result, which broadcasts its operands."""
    return op_kind(op) is OpKind.ELEMENTWISE and not isinstance(op, nn.BatchNormOp) \
        and len(op.results) == 1


def _matmul_chain(v: SSAValue, single_use: bool, depth: int = 0) -> list[Operation] | None:
    """The ops computing `v` from a matmul's result of its shape, in order:
    the matmul, then elementwise ops that each read the one before (a bias,
    a mask added to scores); None when `v` is not so computed (with
    `single_use`: or some value on the way has another use)."""
    owner = v.op if isinstance(v, OpResult) else None
    if owner is None or (single_use and len(list(v.uses)) != 1):
        return None
    if isinstance(owner, nn.MatmulOp):
        return [owner]
    if depth >= MAX_CHAIN or not _elementwise(owner):
        return None
    for o in owner.operands:
        if tensor_shape(o) == tensor_shape(v) and \
                (chain := _matmul_chain(o, single_use, depth + 1)) is not None:
            return [*chain, owner]
    return None


def _hoistable(split: nn.ReshapeOp) -> list[Operation] | None:
    """The matmul and elementwise ops (`_matmul_chain`) computing the value
    that reshape `split` splits, when they can compute it split instead:
    `split` splits batch axes only, not the matrix axes (`[1, nW]` of one
    image's windows too: the mask indexes the window axis all the same),
    nothing else reads a value on the way, and every other operand takes the
    split form as a view (whole or broadcast along each axis split)."""
    extents = tensor_shape(split.results[0])
    groups = merge_groups(extents, tensor_shape(split.operands[0]))
    if groups is None or len(groups) < 3 or any(len(g) > 1 for g in groups[-2:]) \
            or not any(len(g) > 1 for g in groups):
        return None
    chain = _matmul_chain(split.operands[0], single_use=True)
    if chain is None:
        return None
    for op in chain:
        for v in op.operands:
            if split_shape(tensor_shape(v), groups, _operand_extents(op, v, extents)) is None:
                return None
    return chain


def _operand_extents(op: Operation, v: SSAValue, extents: Shape) -> Shape:
    """The split extents of operand `v` of `op`, whose result splits to
    `extents`: a matmul operand has its own matrix axes."""
    if isinstance(op, nn.MatmulOp):
        return (*extents[:-2], *tensor_shape(v)[-2:])
    return extents


def _erase_dead(op: Operation) -> None:
    """Erase `op` when nothing reads it, and then its producers the same way
    (layout ops only: pure)."""
    while isinstance(op, nn.ReshapeOp | nn.BroadcastToOp) and op.parent is not None \
            and not any(r.uses for r in op.results):
        src = op.operands[0]
        Rewriter.erase_op(op)
        if not isinstance(src, OpResult):
            return
        op = src.op


@dataclass(frozen=True)
class UnmergeBroadcastsPass(ModulePass):
    """Undo reshapes that merge a broadcast axis, at the readers that can broadcast instead.

    The module docstring says which readers and why."""

    name = "unmerge-broadcasts"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [f for f in op.walk() if isinstance(f, FuncOp)]:
            # A walk rewrites the readers it meets after a seed; a reader it
            # makes can be the reader of an earlier seed (a `bmm`-form matmul
            # unmerged after the repeat_kv it reads was seeded), which the
            # next walk takes. Each walk that changes something merges fewer
            # axes, so this ends.
            for _ in range(MAX_WALKS):
                if not func.body.blocks:
                    break
                changed = _Unmerger().run(func.body.block)
                if not _Unmerger().hoist(func.body.block) and not changed:
                    break
