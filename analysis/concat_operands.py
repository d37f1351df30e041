"""Concats whose operands the same pointwise kernel computes.

Rotary position embedding (rotate-half) concatenates two values a kernel
computes from the halves of its input:

```mlir
%lo = nn.sub %a, %b : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
%hi = nn.add %c, %d : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
%y = nn.concat %lo, %hi {axis = 2} : (...) -> tensor<4x8x32xf32>
```

The pointwise kernel iterates over the concat's result `[4, 8, 32]`; an
element at `k` along the axis evaluates `%lo`'s expression at `k` when
`k < 16`, else `%hi`'s at `k - 16` (a branch per element,
`codegen/indexed_read.py`): the operands are never written, and neither
branch's work is done for the other's elements. The ops evaluated that way
(`concat_pieces`) are those whose every reader, inside the kernel, is such
a concat (as an operand) or another of them: a value the kernel also reads
elsewhere, or writes, lives at a different iteration shape and is refused
(`piece_refusal`). Only the pointwise kernel evaluates computed operands: a
reduction, matmul or window kernel reads a concat in place only over
operands it loads from memory (`fusion_legality.computed_concat`).
"""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.ir import Operation

from fusec.dialects import nn

_VIEWS = (nn.TransposeOp, nn.SliceOp, nn.ReshapeOp)


def concat_pieces(ops: Iterable[Operation]) -> set[Operation]:
    """The ops of a kernel holding `ops` that it evaluates only under a
    concat's select: every reader of their results is inside, and is a
    concat or another such op (a slice of a group input read only by a
    concat is one too: one load under the select)."""
    inside = set(ops)
    memo: dict[Operation, bool] = {}

    def piece(op: Operation) -> bool:
        if op not in memo:
            memo[op] = False  # no cycles in SSA; the guard keeps recursion finite
            readers = [u.operation for r in op.results for u in r.uses]
            memo[op] = bool(readers) and all(
                u in inside and (isinstance(u, nn.ConcatOp) or piece(u)) for u in readers)
        return memo[op]

    return {op for op in inside if piece(op)}


def computes_pieces(ops: Iterable[Operation]) -> bool:
    """Whether some concat among `ops` has an operand the kernel computes
    (not only slices and reshapes of its inputs, one load each)."""
    return any(not isinstance(op, _VIEWS) for op in concat_pieces(ops))


def piece_refusal(concat: Operation, operand: Operation) -> str:
    """Why a kernel cannot evaluate `operand` (an op it computes, read by
    `concat`) under the concat's select: something else
    reads it (or a value it feeds) at a different iteration shape, or it is
    a result of the kernel."""
    return (f"{concat.name} would read {operand.name}, a value the same kernel also needs "
            "outside the concat's operands (a result, or read by another op); a kernel "
            "evaluates a concat's computed operands only under the concat's select, at the "
            "shape of their piece")
