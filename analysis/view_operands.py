"""Layout ops read in place by pointwise groups: slices, reshapes and
transposes of values read from memory fold into the group's operand loads
as strided views (`analysis/strided_view.py`), so no copy kernel runs.

A SwiGLU gate on the two halves of a projection is one kernel:

```mlir
%a = nn.slice %h {starts = [0, 0], limits = [8, 16], strides = [1, 1]} : ...
%b = nn.slice %h {starts = [0, 16], limits = [8, 32], strides = [1, 1]} : ...
%s = nn.silu %a : tensor<8x16xf32>
%g = nn.mul %s, %b : ...
```

The kernel reads `h[i * 32 + j]` for `%a` and `h[16 + i * 32 + j]` for
`%b`. A chain of slices, reshapes and transposes composes into one view of
the value at its root (the heads of a packed QKV projection: slice, reshape,
transpose); the root must be read from memory (a group input, not a value
the same kernel computes, unless a chain of elementwise ops over values read
from memory computes it: `computed_ops`, evaluated where the view reads),
and the composed view must be an offset plus one stride per dimension, or
for a pointwise kernel one index map over parts of the dimensions
(`operand_map`, `analysis/view_map.py`: a reshape that merges dimensions a
transpose left apart); a chain with neither is refused. A chain whose view
moves the innermost axis is staged through a tile
(`analysis/transposed_operands.py`).

`nn.concat` and `nn.gather` are indexed reads (`INDEXED_READS`): an element
of a concat is read from the operand whose range along `axis` holds its
coordinate, an element of a gather from the table row its index names
(`codegen/indexed_read.py`). A gather's operands must be read from memory:
group inputs, or chains of slices and reshapes of them; a concat's may also
be values the kernel computes only for it, evaluated under its select
(`analysis/concat_operands.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xdsl.ir import Operation, OpResult, SSAValue

from fusec.analysis.concat_operands import concat_pieces, piece_refusal
from fusec.analysis.group_body import GroupBody
from fusec.analysis.op_kinds import OpKind, op_kind
from fusec.analysis.strided_view import StridedView
from fusec.analysis.view_map import ViewMap, compose
from fusec.dialects import nn
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import fmt, numel

CHAINED_VIEWS = (nn.TransposeOp, nn.SliceOp, nn.ReshapeOp)
"""Layout ops that may read another layout op of the same group (the chain
composes into one strided view of its root)."""

FOLDED_VIEWS = (nn.TransposeOp, nn.SliceOp, nn.ReshapeOp)
"""Layout ops a pointwise group reads in place."""

INDEXED_READS = (nn.ConcatOp, nn.GatherOp)
"""Layout ops read in place by a selected or indexed load: a concat picks
its operand by the coordinate along its axis, a gather reads the table at
the index it loads."""

READ_IN_PLACE = (*FOLDED_VIEWS, *INDEXED_READS)
"""Every layout op a pointwise kernel (and, for `INDEXED_READS`, a
reduction kernel) reads in place instead of running a copy kernel."""

_LINKS = (*CHAINED_VIEWS, *INDEXED_READS)
"""Readers through which a view is not read at the iteration shape."""

SECTOR_BYTES = 32
"""Granularity of a global-memory read: a strided read along the innermost
axis moves whole 32-byte sectors, so a step-2 f32 slice costs the full rows."""


def view_ops(ops: Iterable[Operation]) -> list[Operation]:
    """The folded layout ops among `ops`, in order."""
    return [op for op in ops if isinstance(op, FOLDED_VIEWS)]


INDEXED_CHAINS = (nn.SliceOp, nn.ReshapeOp)
"""Layout ops a concat or gather reads its operands through in place (a
transposed operand would be read uncoalesced on the flat schedule)."""


def feeds_indexed_reads(op: Operation, inside: set[Operation]) -> bool:
    """Whether every reader of view `op` inside the group is a slice or
    reshape leading (in the end) only to concats and gathers."""
    readers = [u.operation for u in op.results[0].uses if u.operation in inside]
    return bool(readers) and all(
        isinstance(u, INDEXED_READS) or (isinstance(u, INDEXED_CHAINS)
                                         and feeds_indexed_reads(u, inside))
        for u in readers)


def indexed_refusal(op: Operation, inside: set[Operation]) -> str | None:
    """Why the kernel of the ops in `inside` cannot read concat or gather
    `op` in place, or None: every operand must be read from memory (a group
    input, or a chain of slices and reshapes of one)."""
    pieces = concat_pieces(inside) if isinstance(op, nn.ConcatOp) else set[Operation]()
    for v in op.operands:
        if not isinstance(v, OpResult) or v.op not in inside:
            continue
        if isinstance(op, nn.ConcatOp) and not isinstance(v.op, CHAINED_VIEWS):
            if v.op not in pieces:  # evaluated under the select (`analysis/concat_operands.py`)
                return piece_refusal(op, v.op)
            continue
        if not all(isinstance(link, INDEXED_CHAINS) for link in chain_links(v.op, inside)):
            return (f"{op.name} would read {v.op.name}, a value the same kernel computes; "
                    f"a kernel reads an {op.name} in place only over operands it reads from "
                    "memory (group inputs, and slices and reshapes of them)")
        found = operand_view(v.op, inside)
        if isinstance(found, str):
            return found
    return None


def operand_view(op: Operation, inside: set[Operation]) -> tuple[SSAValue, StridedView] | str:
    """The value `op`'s result is a view of (the root of its chain of slices,
    reshapes and transposes inside `inside`) and the composed strided view,
    or why it is not one."""
    found = operand_map(op, inside)
    if isinstance(found, str):
        return found
    src, view = found
    if isinstance(view, ViewMap):
        return (f"the view {op.name} -> {fmt(view.shape)} of {fmt(tensor_shape(src))} is not "
                "expressible as strides (a reshape that merges dimensions which are not "
                "contiguous needs a copy)")
    return src, view


def operand_map(op: Operation, inside: set[Operation]
                ) -> tuple[SSAValue, StridedView | ViewMap] | str:
    """`operand_view`, or where a reshape merges dimensions that are not
    contiguous, the chain's quasi-affine index map (`analysis/view_map.py`):
    what a pointwise kernel reads in place."""
    chain: list[Operation] = [op]
    src = op.operands[0]
    while isinstance(src, OpResult) and src.op in inside:
        if isinstance(op, CHAINED_VIEWS) and computed_root(src.op, inside):
            break  # evaluated at each element the view reads (`codegen/computed_root.py`)
        if not isinstance(src.op, CHAINED_VIEWS) or not isinstance(op, CHAINED_VIEWS):
            return (f"{op.name} would read {src.op.name}, a value the same kernel computes; "
                    "a pointwise kernel folds a layout op only over operands it reads from "
                    "memory")
        chain.append(src.op)
        src = src.op.operands[0]
    view = compose(tensor_shape(src), chain[::-1])
    if view is None:
        return (f"the view {op.name} -> {fmt(tensor_shape(op.results[0]))} of "
                f"{fmt(tensor_shape(src))} is not expressible as strides or as one index map "
                "(a slice across merged dimensions, or sizes that do not factor, need a copy)")
    return src, view


def computed_root(op: Operation, inside: set[Operation]) -> bool:
    """Whether `op` is an elementwise op of the kernel of the ops in `inside`
    that the kernel evaluates at the source element each view element maps
    to (`computed_ops`), instead of a kernel writing its result for a copy
    to read (`analysis/view_chains.py`)."""
    return op in computed_ops(inside)


def computed_ops(inside: Iterable[Operation]) -> set[Operation]:
    """The elementwise ops of the kernel of the ops in `inside` that only
    chains of layout ops read, directly or through other such ops, over
    operands read from memory (group inputs, a splat constant of the kernel:
    a literal, or another of these ops): a chain like `mul -> relu` before a
    slice is evaluated at each element the slice reads
    (`codegen/computed_root.py`), never at the iteration shape.

    The largest such set: start from every single-result elementwise op and
    drop, until nothing changes, each one with a reader that is neither a
    chained layout op of the kernel nor kept, or an operand the kernel
    computes some other way."""
    members = set(inside)
    if not any(isinstance(op, CHAINED_VIEWS) for op in members):
        return set()  # every kept op is read, in the end, by a layout op of the kernel
    kept = {op for op in members if op_kind(op) is OpKind.ELEMENTWISE and len(op.results) == 1
            and op.results[0].uses}
    # Dropping an op can only drop its producers (a reader no longer kept) and
    # its readers (an operand no longer kept): check those again, nothing else.
    pending = list(kept)
    while pending:
        op = pending.pop()
        if op in kept and not _computed_here(op, members, kept):
            kept.discard(op)
            pending.extend(v.op for v in op.operands
                           if isinstance(v, OpResult) and v.op in kept)
            pending.extend(u.operation for u in op.results[0].uses if u.operation in kept)
    return kept


def _computed_here(op: Operation, inside: set[Operation], kept: set[Operation]) -> bool:
    readers = [u.operation for u in op.results[0].uses]
    return all(u in inside and (isinstance(u, CHAINED_VIEWS) or u in kept)
               for u in readers) and all(
        # a splat constant moved into the group (`group-each-op`) is a literal
        not isinstance(v, OpResult) or v.op not in inside or isinstance(v.op, nn.ConstantOp)
        or v.op in kept for v in op.operands)


def chain_links(op: Operation, inside: set[Operation]) -> list[Operation]:
    """`op` and the layout ops inside `inside` it reads through, outermost first."""
    chain = [op]
    while isinstance(chain[-1], CHAINED_VIEWS) and isinstance(
            src := chain[-1].operands[0], OpResult) and src.op in inside and (
            isinstance(src.op, CHAINED_VIEWS)):
        chain.append(src.op)
    return chain


def is_chain_end(op: Operation, inside: set[Operation]) -> bool:
    """Whether the kernel of the ops in `inside` reads layout op `op`'s result
    itself: it is no inner link of a chain (something other than a chained
    layout op, a concat or a gather reads it, or nothing inside does)."""
    readers = [u.operation for u in op.results[0].uses if u.operation in inside]
    return not readers or any(not isinstance(u, _LINKS) for u in readers)


def view_refusal(ops: Sequence[Operation], shape: Sequence[int],
                 maps: bool = False) -> str | None:
    """Why a kernel over `shape` holding `ops` cannot read its slices and
    reshapes in place, or None when it can; with `maps` (a pointwise
    kernel) a chain may be read through its quasi-affine index map
    (`operand_map`), else only through a strided view."""
    inside = set(ops)
    pieces = concat_pieces(ops)
    for op in ops:
        if not isinstance(op, _LINKS):
            continue
        reason = indexed_refusal(op, inside) if isinstance(op, INDEXED_READS) else (
            _chain_refusal(op, inside, maps))
        if reason is not None:
            return reason
        readers = [u.operation for u in op.results[0].uses if u.operation in inside]
        if (readers and all(isinstance(u, _LINKS) for u in readers)) or op in pieces:
            continue  # an inner link of a chain, or read at its concat piece's shape
        result = tensor_shape(op.results[0])
        offset = len(shape) - len(result)
        if offset < 0 or any(n not in (1, shape[offset + d]) for d, n in enumerate(result)):
            return (f"the view {op.name} of {fmt(result)} does not broadcast into the "
                    f"iteration space {fmt(shape)}")
    return None


def _chain_refusal(op: Operation, inside: set[Operation], maps: bool) -> str | None:
    found = operand_map(op, inside) if maps else operand_view(op, inside)
    return found if isinstance(found, str) else None


def view_reads(ops: Sequence[Operation], value: SSAValue,
               computed: set[Operation] | None = None) -> list[StridedView] | None:
    """The views through which a group of `ops` reads its input `value`
    (the outermost link of each chain), or None when some op reads it whole
    (`computed`: `computed_ops` of `ops`, when the caller has it)."""
    views, whole = input_reads(ops, value, computed)
    return None if whole else views


def input_reads(ops: Sequence[Operation], value: SSAValue,
                computed: set[Operation] | None = None) -> tuple[list[StridedView], bool]:
    """The views through which a group of `ops` reads its input `value`
    (the outermost link of each chain), and whether some op reads it whole.
    `computed` is `computed_ops(ops)` where the caller asks for several
    inputs of one group (it costs as much as the rest of the call)."""
    inside = set(ops)
    if computed is None:
        computed = computed_ops(inside)
    views: list[StridedView] = []
    whole = False
    for use in value.uses:
        op = use.operation
        if op not in inside:
            continue
        if isinstance(op, nn.GatherOp) and use.index == 0:
            # the rows the indices name, each read once per index
            views.append(StridedView.contiguous(tensor_shape(op.results[0])))
            continue
        if op in computed and tensor_shape(value) == tensor_shape(op.results[0]):
            # read at the elements the chains of the recomputed ops read
            found = _computed_ends(op, inside)
            if found is not None:
                views += found
                continue
        if not isinstance(op, FOLDED_VIEWS):
            whole = True
            continue
        views += _chain_ends(op, inside)
    return views, whole


def _computed_ends(op: Operation, inside: set[Operation]) -> list[StridedView] | None:
    """The views the chains read computed op `op` through, following the
    computed ops of its shape that read it; None when one of a larger shape
    reads it (broadcast: every element of `op` is read)."""
    ends: list[StridedView] = []
    for u in op.results[0].uses:
        reader = u.operation
        if isinstance(reader, CHAINED_VIEWS):
            ends += _chain_ends(reader, inside)
            continue
        more = _computed_ends(reader, inside) if tensor_shape(reader.results[0]) == (
            tensor_shape(op.results[0])) else None
        if more is None:
            return None
        ends += more
    return ends


def _chain_ends(op: Operation, inside: set[Operation]) -> list[StridedView]:
    """Views of the links that something other than a chained layout op reads."""
    ends: list[StridedView] = []
    readers = [u.operation for u in op.results[0].uses if u.operation in inside]
    if not readers or any(not isinstance(u, CHAINED_VIEWS) for u in readers):
        found = operand_map(op, inside)  # a concat reads it whole, once
        if not isinstance(found, str):  # an index map reads the same elements as its parts
            ends.append(found[1].fine if isinstance(found[1], ViewMap) else found[1])
    for u in readers:
        if isinstance(u, CHAINED_VIEWS):
            ends += _chain_ends(u, inside)
    return ends


def bytes_read(ops: Sequence[Operation], value: SSAValue, nbytes: int,
               computed: set[Operation] | None = None) -> int:
    """Bytes a group of `ops` moves from DRAM to read its input `value` of
    `nbytes`: the elements its views cover (whole sectors where the innermost
    stride skips elements), at most the whole buffer (`computed`: as for
    `input_reads`)."""
    views = view_reads(ops, value, computed)
    total = numel(tensor_shape(value))
    if views is None or not total:
        return nbytes
    item = nbytes // total
    read = sum(numel(v.shape) * item * _sector_factor(v, item) for v in set(views))
    return min(nbytes, read)


def _sector_factor(view: StridedView, item: int) -> int:
    long_axes = [d for d in range(len(view.shape)) if view.shape[d] > 1]
    if not long_axes:
        return 1
    # the contiguous axis (the innermost, or the one a transposed view's tile
    # stages along: `analysis/transposed_operands.py`)
    inner = min(abs(view.strides[d]) for d in long_axes)
    return max(1, min(inner, SECTOR_BYTES // max(1, item)))


def extra_reads(ops: Sequence[Operation], inputs: Iterable[SSAValue]) -> int:
    """Loads per element beyond one per input: an input read through several
    views (the two halves of a SwiGLU gate) is loaded once per view; a
    concat of n operands loads one of them per element (n - 1 fewer), a
    gather holds its loaded index and the clamped row besides (one more)."""
    extra = 0
    computed = computed_ops(set(ops))
    for v in inputs:
        views = view_reads(ops, v, computed)
        if views:
            extra += len(set(views)) - 1
    for op in ops:
        if isinstance(op, nn.ConcatOp):
            extra -= len(op.operands) - 1
        elif isinstance(op, nn.GatherOp):
            extra += 1
    return extra


def read_directly(body: GroupBody, op: Operation) -> bool:
    """Whether the kernel loads `op`'s result (something other than another
    chained layout op, a concat or a gather reads it, or it is a result of
    the group)."""
    return op.results[0] in body.outputs or any(
        not isinstance(u.operation, (*CHAINED_VIEWS, *INDEXED_READS))
        for u in op.results[0].uses)
