"""The emitter of `layout` groups: transpose, slice, concat, gather, and a plain
copy for a reshape that must materialize.

Each kernel is a grid-stride loop with one thread per output element: the
thread splits its flat output index into coordinates and reads the one input
element those coordinates name. Shapes are collapsed first so the index math
is as short as the op allows (a transpose of `[2, 3, 4]` by `perm = [2, 0, 1]`
is a 2-d transpose of `[6, 4]`). A transpose that swaps the last two
collapsed dimensions, both at least 32 long, goes through 32x32 shared-memory
tiles instead, so that reads and writes are both coalesced.

```mlir
%y = fusion.group (%x) {name = "g0", kind = "layout"}
    : (tensor<4x8xf32>) -> tensor<8x4xf32> {
^bb0(%a: tensor<4x8xf32>):
  %t = nn.transpose %a {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  fusion.yield %t : tensor<8x4xf32>
}
```

`nn.gather` wraps negative indices once (as `numpy.take`) and clamps any
index still outside the table to its first or last entry: a kernel cannot
raise, and reading outside the table would be undefined behaviour. The
reference interpreter reports such an index as an error instead, so results
differ only for programs that are already wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.ir import Operation

from fusec.analysis.diagnostics import op_error
from fusec.codegen.kernel_source import (
    KernelParam,
    KernelSource,
    UnsupportedTypeError,
    grid_stride_launch,
    int_literal,
    kernel_header,
    launch_text,
    numba_type,
    unravel,
    value_dtype,
)
from fusec.codegen.launch_grid import block_index_lines
from fusec.dialects import nn, shapes
from fusec.dialects.fusion import GroupOp, YieldOp
from fusec.dialects.nn_base import tensor_shape

_INDENT = "    "


@dataclass
class _Body:
    """The per-element lines of one layout op, and its parameters beyond the
    output (group operand indices)."""

    lines: list[str]  # run inside the loop over the flat output index `i`
    inputs: list[int]  # group operand indices, in parameter order
    notes: list[str]


def _strides(shape: Sequence[int]) -> list[int]:
    """Row-major element strides of `shape`."""
    out = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        out[d] = out[d + 1] * shape[d + 1]
    return out


def _dot(coords: Sequence[str], strides: Sequence[int]) -> str:
    """`c0 * s0 + c1 * s1 + ...` without zero terms or unit factors."""
    terms = [c if s == 1 else f"{c} * {int_literal(s)}" for c, s in zip(coords, strides,
                                                                         strict=True) if s]
    return " + ".join(terms) if terms else "0"


def collapse_transpose(
    in_shape: Sequence[int], perm: Sequence[int]
) -> tuple[list[int], list[int]]:
    """Drop size-1 dimensions and merge runs of output dimensions that stay
    neighbours in the input; returns the collapsed input shape and perm."""
    kept = [p for p in perm if in_shape[p] != 1]
    runs: list[list[int]] = []
    for p in kept:
        if runs and runs[-1][-1] + 1 == p:
            runs[-1].append(p)
        else:
            runs.append([p])
    order = sorted(range(len(runs)), key=lambda r: runs[r][0])  # runs in input order
    new_shape = [shapes.numel([in_shape[p] for p in runs[r]]) for r in order]
    position = {r: k for k, r in enumerate(order)}
    return new_shape, [position[r] for r in range(len(runs))]


def _transpose(op: nn.TransposeOp) -> _Body:
    in_shape, perm = collapse_transpose(op.operand_shape(), op.perm)
    out_shape = [in_shape[p] for p in perm]
    lines, coords = unravel("i", out_shape)
    in_strides = _strides(in_shape)
    index = _dot(coords, [in_strides[p] for p in perm])
    note = f"collapsed to a transpose of {shapes.fmt(in_shape)} by perm {perm}"
    return _Body([*lines, f"out0[i] = in0[{index}]"], [0], [note])


def _slice(op: nn.SliceOp) -> _Body:
    in_strides = _strides(op.operand_shape())
    lines, coords = unravel("i", op.result_shape)
    base = sum(s * st for s, st in zip(op.starts, in_strides, strict=True))
    steps = [st * step for st, step in zip(in_strides, op.strides, strict=True)]
    index = _dot(coords, steps)
    if base:
        index = f"{int_literal(base)} + {index}"
    return _Body([*lines, f"out0[i] = in0[{index}]"], [0], [])


def _concat(op: nn.ConcatOp) -> _Body:
    """Collapsed to `[outer, total * inner]`: input k owns a column range."""
    out_shape = op.result_shape
    axis = op.axis
    inner = shapes.numel(out_shape[axis + 1 :])
    row = out_shape[axis] * inner
    lines = [f"col = i % {int_literal(max(row, 1))}", f"outer = i // {int_literal(max(row, 1))}"]
    pieces: list[tuple[int, int, int]] = []  # (operand, first column, width)
    start = 0
    for k in range(len(op.inputs)):
        width = op.operand_shape(k)[axis] * inner
        if width:  # an empty operand owns no column
            pieces.append((k, start, width))
        start += width
    for n, (k, first, width) in enumerate(pieces):
        local = "col" if first == 0 else f"col - {int_literal(first)}"
        read = f"out0[i] = in{k}[outer * {int_literal(width)} + {local}]"
        if len(pieces) == 1:
            lines.append(read)
            continue
        if n == len(pieces) - 1:
            lines.append("else:")
        else:
            lines.append(f"{'if' if n == 0 else 'elif'} col < {int_literal(first + width)}:")
        lines.append(_INDENT + read)
    return _Body(lines, list(range(len(op.inputs))), [])


def _gather(op: nn.GatherOp) -> _Body:
    """Collapsed to `out[o, j, k] = table[o, idx[j], k]`, indices clamped."""
    table = op.operand_shape(0)
    axis = op.axis
    size = table[axis]
    inner = shapes.numel(table[axis + 1 :])
    count = shapes.numel(op.operand_shape(1))
    lines, (o, j, k) = unravel("i", (shapes.numel(table[:axis]), count, inner))
    lines += [
        f"idx = int64(in1[{j}])",
        "if idx < 0:",
        f"{_INDENT}idx += {int_literal(size)}",
        f"idx = min(max(idx, 0), {int_literal(size - 1)})",
        f"out0[i] = in0[({o} * {int_literal(size)} + idx) * {int_literal(inner)} + {k}]",
    ]
    note = "indices wrap once when negative, then clamp into the table"
    return _Body(lines, [0, 1], [note])


def _copy(op: Operation) -> _Body:
    return _Body(["out0[i] = in0[i]"], [0], ["a materialized reshape: a plain copy"])


_BODIES: dict[type[Operation], Callable[..., _Body]] = {
    nn.TransposeOp: _transpose,
    nn.SliceOp: _slice,
    nn.ConcatOp: _concat,
    nn.GatherOp: _gather,
    nn.ReshapeOp: _copy,
}


def _the_op(group: GroupOp) -> Operation:
    """The single layout op of the group, or a located error."""
    ops = [op for op in group.block.ops if not isinstance(op, YieldOp)]
    if len(ops) != 1 or type(ops[0]) not in _BODIES:
        names = ", ".join(op.name for op in ops) or "no op"
        raise op_error(group, f"a layout group must hold exactly one layout op, got {names}")
    op = ops[0]
    terminator = group.block.last_op
    assert isinstance(terminator, YieldOp)
    if list(terminator.values) != list(op.results) or any(
        operand.owner is not group.block for operand in op.operands
    ):
        raise op_error(group, "a layout group must read its inputs and yield its op's result")
    try:
        for v in (*op.operands, *op.results):
            value_dtype(v)
    except UnsupportedTypeError as err:
        raise op_error(op, str(err)) from None
    return op


# Tiled transpose: a TILE x TILE tile goes through shared memory so that both
# the reads and the writes of a warp touch 32 consecutive elements; each of
# the TILE x TILE_ROWS threads moves TILE / TILE_ROWS elements. The tile row
# is padded by one element so a column of the tile spans all 32 banks.
TILE = 32
TILE_ROWS = 8

def batched_2d(op: nn.TransposeOp) -> tuple[int, int, int] | None:
    """(batch, rows, cols) when the transpose is `[batch, R, C] -> [batch, C, R]`
    after collapsing, with both R and C at least a tile: the case where the
    one-element-per-thread kernel would read with a stride."""
    in_shape, perm = collapse_transpose(op.operand_shape(), op.perm)
    if perm == [1, 0]:
        batch, (rows, cols) = 1, in_shape
    elif perm == [0, 2, 1]:
        batch, rows, cols = in_shape
    else:
        return None
    if rows < TILE or cols < TILE:
        return None
    return batch, rows, cols


def _tiled_transpose_lines(batch: int, rows: int, cols: int,
                           ctype: str) -> tuple[list[str], frozenset[str]]:
    r, c = int_literal(rows), int_literal(cols)
    tile = [
        f"r0 = rt * {TILE}",
        f"for k in range(0, {TILE}, {TILE_ROWS}):",
        "    r = r0 + ty + k",
        f"    if r < {r} and c0 + tx < {c}:",
        "        tile[ty + k, tx] = in0[b, r, c0 + tx]",
        "cuda.syncthreads()",
        f"for k in range(0, {TILE}, {TILE_ROWS}):",
        "    c = c0 + ty + k",
        f"    if c < {c} and r0 + tx < {r}:",
        "        out0[b, c, r0 + tx] = tile[tx, ty + k]",
    ]
    # batch entries (z) and row tiles (y) may pass the grid limit: blocks loop
    loops = [("b", "z", batch), ("rt", "y", -(-rows // TILE))]
    body, looped = block_index_lines(loops, tile, reuses_shared=True)
    return [
        f"tile = cuda.shared.array(({TILE}, {TILE + 1}), {ctype})",
        "tx = cuda.threadIdx.x",
        "ty = cuda.threadIdx.y",
        f"c0 = cuda.blockIdx.x * {TILE}",
        *body,
    ], looped


def emit_tiled_transpose(
    group: GroupOp, op: nn.TransposeOp, kernel_name: str, dims: tuple[int, int, int]
) -> KernelSource:
    """A batched 2-d transpose through shared-memory tiles."""
    batch, rows, cols = dims
    grid = (-(-cols // TILE), -(-rows // TILE), batch)
    block = (TILE, TILE_ROWS, 1)
    dtype = value_dtype(op.x)
    notes = [
        f"batched 2-d transpose of {batch} x {rows}x{cols} in {TILE}x{TILE} shared tiles",
        f"static shared memory: {TILE * (TILE + 1) * np.dtype(dtype).itemsize} bytes",
    ]
    per_thread = f"{TILE // TILE_ROWS} elements per thread"
    header = kernel_header(group, [op], launch_text(grid, block, per_thread), notes)
    lines, looped = _tiled_transpose_lines(batch, rows, cols, numba_type(dtype))
    text = "\n".join([*header, "@cuda.jit", f"def {kernel_name}(in0, out0):",
                      *(_INDENT + line for line in lines)])
    source = list(group.block.args).index(op.x)  # pyright: ignore[reportArgumentType]
    params = [KernelParam("input", source, (batch, rows, cols)),
              KernelParam("output", 0, (batch, cols, rows))]
    return KernelSource(kernel_name, text + "\n", grid, block, params, notes=notes,
                        grid_loops=looped)


def emit(group: GroupOp, kernel_name: str) -> KernelSource:
    """Generate the kernel of layout `group`, named `kernel_name`."""
    op = _the_op(group)
    if isinstance(op, nn.TransposeOp) and (dims := batched_2d(op)) is not None:
        return emit_tiled_transpose(group, op, kernel_name, dims)
    body = _BODIES[type(op)](op)
    block_args = list(group.block.args)
    # Map the op's operand numbers to the group's (a concat of %a, %a reads
    # one group input twice).
    operand_of = [block_args.index(v) for v in op.operands]  # pyright: ignore[reportArgumentType]
    n = shapes.numel(op.results[0].type.get_shape())  # pyright: ignore[reportAttributeAccessIssue]
    grid, block = grid_stride_launch(n)
    header = kernel_header(group, [op], launch_text(grid, block, "one element per thread"),
                           body.notes)
    params = [f"in{k}" for k in body.inputs] + ["out0"]
    text = "\n".join([
        *header,
        "@cuda.jit",
        f"def {kernel_name}({', '.join(params)}):",
        f"{_INDENT}start = cuda.grid(1)",
        f"{_INDENT}stride = cuda.gridsize(1)",
        f"{_INDENT}for i in range(start, {int_literal(n)}, stride):",
        *(_INDENT * 2 + line for line in body.lines),
    ])
    kernel_params = [
        KernelParam("input", operand_of[k], (shapes.numel(tensor_shape(op.operands[k])),))
        for k in body.inputs
    ] + [KernelParam("output", 0, (n,))]
    return KernelSource(kernel_name, text + "\n", grid, block, kernel_params,
                        notes=[f"layout ({op.name}), one element per thread"])
