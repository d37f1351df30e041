"""Kernels for a `kind = "window"` group holding a convolution, its
elementwise epilogue and a max or average pool of the result, optionally
followed by an elementwise epilogue of the pool: the conv tile never goes to
memory.

```mlir
%p = fusion.group (%x, %w, %b) {kind = "window"} : (...) -> tensor<1x4x4x4xf32> {
^bb0(%xa: tensor<1x3x8x8xf32>, %wa: tensor<4x3x3x3xf32>, %ba: tensor<4x1x1xf32>):
  %c = nn.conv2d %xa, %wa {pads = [1, 1, 1, 1]} : (...) -> tensor<1x4x8x8xf32>
  %s = nn.add %c, %ba : (tensor<1x4x8x8xf32>, tensor<4x1x1xf32>) -> tensor<1x4x8x8xf32>
  %r = nn.relu %s : tensor<1x4x8x8xf32>
  %p0 = nn.max_pool2d %r {kernel = [2, 2], strides = [2, 2]} : (...) -> tensor<1x4x4x4xf32>
  fusion.yield %p0 : tensor<1x4x4x4xf32>
}
```

Schedule: one block per `POOL_TILE x POOL_TILE` tile of pooled outputs of
one (image, channel) (`blockIdx.x` the tile, `y` the channel, `z` the
image). Its threads first compute every conv output the tile's pool windows
cover (the tile plus its halo: `(T - 1) * stride + window` per side) with the
conv's epilogue, into a shared-memory tile; conv positions outside the conv
output (pool padding) hold the pool's identity. After one barrier each
thread pools from shared memory, applies the pool's epilogue and stores.
Average pooling divides by the taps inside the conv output (padding is not
counted), as `codegen/window.py` does.
"""

from __future__ import annotations

from fusec.analysis.group_body import GroupBody, compute_type
from fusec.codegen.kernel_source import (
    KernelSource,
    float_literal,
    int_literal,
    kernel_header,
    launch_text,
    max_expr,
)
from fusec.codegen.launch_grid import block_index_lines
from fusec.codegen.point_evaluator import PointEvaluator, body_params, indent, store_lines
from fusec.codegen.window import _conv_lines  # pyright: ignore[reportPrivateUsage]
from fusec.dialects import nn
from fusec.dialects.fusion import GroupOp
from fusec.dialects.nn_base import tensor_shape
from fusec.scheduling.conv_pool_tile import POOL_TILE
from fusec.scheduling.window_group_plan import ConvPool
from fusec.scheduling.window_shape import WindowShape

CONV_POOL_THREADS = 128


def emit(group: GroupOp, kernel_name: str, body: GroupBody, plan: ConvPool) -> KernelSource:
    """The kernel (see the module docstring); `body` is the decomposed
    group's, `plan` its conv + pool plan (`scheduling/window_group_plan.py`)."""
    conv, pool = plan.conv, plan.pool
    conv_out, pool_out = tensor_shape(conv.results[0]), tensor_shape(pool.results[0])
    kh, kw = conv.operand_shape(1)[2:]
    w = WindowShape(body, conv, conv.operands[0], conv_out, (kh, kw), conv.strides, conv.pads,
                    conv.dilations)
    ctype = compute_type(conv.results[0])
    ch, cw = plan.conv_tile
    tiles_w = -(-pool_out[3] // POOL_TILE)
    tiles = -(-pool_out[2] // POOL_TILE) * tiles_w
    grid = (tiles, pool_out[1], pool_out[0])
    block = (CONV_POOL_THREADS, 1, 1)
    name = kernel_name  # from NameTable: unique in kernels.py
    notes = [f"{conv.name} {conv_out} + {pool.name} -> {pool_out}: {POOL_TILE}x{POOL_TILE} "
             f"pooled outputs per block, a {ch}x{cw} conv tile (with halo) in shared memory"]
    head = kernel_header(group, body.ops, launch_text(grid, block, "a pooled tile per block"),
                         notes)
    (ph, pw), (psh, psw) = pool.kernel, pool.strides
    setup = [
        "t = cuda.threadIdx.x",
        f"ph0 = (cuda.blockIdx.x // {int_literal(tiles_w)}) * {POOL_TILE}",
        f"pw0 = (cuda.blockIdx.x % {int_literal(tiles_w)}) * {POOL_TILE}",
        f"ch0 = ph0 * {int_literal(psh)} - {int_literal(pool.pads[0])}",
        f"cw0 = pw0 * {int_literal(psw)} - {int_literal(pool.pads[1])}",
        f"ctile = cuda.shared.array(({ch}, {cw}), {ctype})",
    ]
    lines = [
        "# 1. the conv tile and its halo, conv epilogue applied, into shared memory",
        f"for e in range(t, {ch * cw}, {CONV_POOL_THREADS}):",
        *indent(_fill_lines(w, pool, ctype, cw), 1),
        "cuda.syncthreads()",
        "# 2. pool from shared memory, the pool's epilogue, the stores",
        f"for e in range(t, {POOL_TILE * POOL_TILE}, {CONV_POOL_THREADS}):",
        f"    p2 = ph0 + e // {POOL_TILE}",
        f"    p3 = pw0 + e % {POOL_TILE}",
        f"    if p2 < {int_literal(pool_out[2])} and p3 < {int_literal(pool_out[3])}:",
        *indent(_pool_lines(body, pool, ctype, (ph, pw), (psh, psw), conv_out), 2),
    ]
    # images (z) and output channels (y) may pass the grid limit: blocks loop
    loops = [("o0", "z", pool_out[0]), ("o1", "y", pool_out[1])]
    per_block, looped = block_index_lines(loops, lines, reuses_shared=True)
    lines = setup + per_block
    text = "\n".join([*head, "@cuda.jit", f"def {name}({body.signature()}):",
                      *indent(lines, 1)])
    return KernelSource(name, text, grid, block, body_params(body), shared_bytes=0, notes=notes,
                        grid_loops=looped)


def _fill_lines(w: WindowShape, pool: nn.MaxPool2dOp | nn.AvgPool2dOp, ctype: str,
                cw: int) -> list[str]:
    """One conv position of the tile: the conv, its epilogue up to the pool's
    input, stored in `ctile`; outside the conv output the pool's identity."""
    oh, ow = w.out[2], w.out[3]
    ev = PointEvaluator(w.body, w.out, ["o0", "o1", "o2", "o3"], bound={w.op.results[0]: "res"})
    val = ev.value(pool.operands[0])
    identity = float_literal(-float("inf") if isinstance(pool, nn.MaxPool2dOp) else 0.0, ctype)
    return [
        f"o2 = ch0 + e // {cw}",
        f"o3 = cw0 + e % {cw}",
        f"if 0 <= o2 < {int_literal(oh)} and 0 <= o3 < {int_literal(ow)}:",
        *indent([*_conv_lines(w, ctype), *ev.take_lines(),
                 f"ctile[e // {cw}, e % {cw}] = {val}"], 1),
        "else:",
        f"    ctile[e // {cw}, e % {cw}] = {identity}",
    ]


def _pool_lines(body: GroupBody, pool: nn.MaxPool2dOp | nn.AvgPool2dOp, ctype: str,
                window: tuple[int, int], strides: tuple[int, int],
                conv_out: tuple[int, ...]) -> list[str]:
    """One pooled output from the shared tile, its epilogue and stores."""
    (ph, pw), (psh, psw) = window, strides
    is_max = isinstance(pool, nn.MaxPool2dOp)
    init = float_literal(-float("inf") if is_max else 0.0, ctype)
    row = f"(e // {POOL_TILE}) * {int_literal(psh)} + kh"
    col = f"(e % {POOL_TILE}) * {int_literal(psw)} + kw"
    tap = f"ctile[{row}, {col}]"
    inner = [f"ptap = {tap}", f"pres = {max_expr('pres', 'ptap', ctype)}"] if is_max else [
        f"r = ch0 + {row}",
        f"c = cw0 + {col}",
        f"if 0 <= r < {int_literal(conv_out[2])} and 0 <= c < {int_literal(conv_out[3])}:",
        f"    pres += {tap}",
        "    taps += 1",
    ]
    lines = [f"pres = {init}", *([] if is_max else ["taps = 0"]),
             f"for kh in range({int_literal(ph)}):",
             f"    for kw in range({int_literal(pw)}):",
             *indent(inner, 2)]
    if not is_max:
        lines.append(f"pres = pres / {ctype}(max(taps, 1))")
    out = tensor_shape(pool.results[0])
    coords = ["o0", "o1", "p2", "p3"]
    ev = PointEvaluator(body, out, coords, bound={pool.results[0]: "pres"})
    for k, v in enumerate(body.outputs):
        val = ev.value(v)
        lines += ev.take_lines()
        lines += store_lines(k, v, val, out, coords)
    return lines
