"""Tiled kernels for a lone window op (`nn.conv2d`, `nn.max_pool2d`,
`nn.avg_pool2d`) with its elementwise epilogue, following the plan
`tile-and-promote` recorded (`scheduling/window_plan.py`): inputs and weights
are staged once per block in shared memory (`codegen/window_staging.py`)
and every thread keeps a `pt x ot` tile of outputs in scalar accumulators.

```mlir
%y = fusion.group (%x, %w, %b) {kind = "window", schedule = #fusion.window<path = "pixels",
    th = 1, tw = 128, oc_t = 64, ci_step = 32, pt = 4, ot = 8>}
    : (...) -> tensor<32x192x56x56xf32> {
^bb0(%xa: tensor<32x32x56x56xf32>, %wa: tensor<192x32x1x1xf32>, %ba: tensor<192x1x1xf32>):
  %c = nn.conv2d %xa, %wa : (...) -> tensor<32x192x56x56xf32>
  %s = nn.add %c, %ba : (...) -> tensor<32x192x56x56xf32>
  %r = nn.clamp %s {min = 0.0, max = 6.0} : tensor<32x192x56x56xf32>
  fusion.yield %r : tensor<32x192x56x56xf32>
}
```

Schedules (`blockIdx.z` the image; `blockIdx.y` the output-channel block,
`oc_t` channels of one conv group, or the channel of a depthwise block;
`blockIdx.x` the spatial tile; a block loops over images and channel blocks
where there are more than the grid holds, `codegen/launch_grid.py`):

- `pixels` (1x1 conv, stride 1, no padding): per step of `ci_step` input
  channels the block stages `xs[ci][p]` (`tw` consecutive pixels of the
  flattened H*W, coalesced) and the weights `ws[ci][oc]`; each thread
  multiplies its `pt` pixels (`tw / pt` apart: a warp reads consecutive
  banks and stores coalesced) by its `ot` channels' weights (adjacent: two
  16-byte broadcast reads for 8 channels).
- `general`: per step the block stages the input halo tile of its `th x tw`
  outputs, `xs[ci * rows + row][col]`, and `ws[ci * kh * kw + tap][oc]`.
  A thread owns `pt` consecutive rows of one column: per input channel and
  kernel column it reads each distinct input row its taps touch once and
  reuses it for every output row and channel.
- `depthwise` (one input channel per group, any channel multiplier, and the
  pools): one output channel per block, its input channel's halo tile
  `xs[row][col]`, the window's weights in registers (taps unrolled up to
  `MAX_UNROLLED_TAPS`), `pt` rows of one column per thread.

A block has at least a warp; threads past the ones that own outputs only
help stage. Staging issues a batch of loads before their shared stores
(addresses clamped into the input, an element outside it replaced by the
padding value), and when a thread stages few elements the channel steps
are pipelined (the next step loaded into registers during this one's FMAs).
Padding taps hold zero (conv, avg pool) or -inf (max pool), and channels
past a group's end zero, so the inner loops have no bounds checks. An
operand computed by a prologue (a clamp before the conv, a transposed
weight) is evaluated once per staged element (`operand_reader`), its
one-element inputs loaded once at the kernel's start; padding is applied
after it, as `codegen/window.py` does. Average pooling divides by
the taps inside the input (padding is not counted). The epilogue runs per
accumulator in registers, values that only depend on the channel (a bias)
once per channel, then the stores.

The tiles are static shared arrays (their bytes are in the kernel's notes
and the group's `shared_bytes_est`): the launch requests no dynamic shared
memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.ir import BlockArgument, SSAValue

from fusec.analysis.fused_prologue import prologue_ops
from fusec.analysis.group_body import GroupBody, compute_type, dtype_name
from fusec.codegen.kernel_source import (
    KernelSource,
    broadcast_index,
    float_literal,
    int_literal,
    kernel_header,
    launch_text,
    max_expr,
)
from fusec.codegen.launch_grid import block_index_lines
from fusec.codegen.operand_reader import read_at
from fusec.codegen.point_evaluator import (
    Loader,
    PointEvaluator,
    body_params,
    hold_scalars,
    indent,
    load_expr,
    store_expr,
    store_lines,
)
from fusec.codegen.reduction_tree import SIMULATED
from fusec.codegen.window_flat_staging import FlatHalo
from fusec.codegen.window_out_words import out_word_lines
from fusec.codegen.window_staging import (
    Stager,
    Tile,
    at,
    clamp,
    guarded,
    minus,
    plus,
    times,
)
from fusec.codegen.window_wide_staging import WideHalo
from fusec.dialects.fusion import GroupOp
from fusec.dialects.nn_base import tensor_shape
from fusec.dialects.shapes import fmt
from fusec.scheduling.window_plan import TiledWindow, weight_pad
from fusec.scheduling.window_shape import WindowShape
from fusec.scheduling.window_stage_lanes import flat_lanes, out_lanes, stage_lanes


def emit_tiled(flat: GroupOp, kernel_name: str, w: WindowShape,
               tiled: TiledWindow) -> KernelSource:
    """The kernel of a lone window group under `tiled` (see the module
    docstring); `flat` is the decomposed group, `w` its analysis."""
    name = kernel_name  # from NameTable: unique in kernels.py
    p = tiled.plan
    notes = [
        f"{w.op.name} {fmt(w.in_shape)} -> {fmt(w.out)}, window {w.kernel[0]}x{w.kernel[1]}, "
        f"strides {w.strides}, pads {w.pads}, dilations {w.dilations}",
        f"{tiled.mode} schedule: block tile {p.text()}",
        f"static shared memory: {tiled.shared_bytes} bytes",
    ]
    per_thread = f"{p.pt}x{p.ot} outputs per thread"
    head = kernel_header(flat, w.body.ops, launch_text(tiled.grid, tiled.block, per_thread),
                         notes)
    writer = _Writer(w, tiled)
    text = "\n".join([*head, "@cuda.jit", f"def {name}({w.body.signature()}):",
                      *indent(writer.lines(), 1)])
    # The tiles are static shared arrays: nothing to request at launch time
    # (a launch's shared_bytes is dynamic memory on top of the static).
    return KernelSource(name, text, tiled.grid, tiled.block, body_params(w.body),
                        shared_bytes=0, notes=notes, grid_loops=writer.grid_loops)


def _shape(rows: int, cols: int) -> str:
    """A shared array's shape: literals, as numba needs them at compile time."""
    return f"({int_literal(rows)}, {int_literal(cols)})"


@dataclass
class _Pixel:
    """One output pixel of a thread: the lines naming it, its row and
    column, its offset in the output plane and the terms under which it is
    inside the output."""

    lines: list[str]
    o2: str
    o3: str
    flat: str
    terms: list[str]


class _Writer:
    """Writes the body of one tiled window kernel. Accumulators, fragments,
    staged elements and weights are scalar variables (`acc2_3`, `x1`,
    `xs_v4`, `w0_2`): numba leaves indexed local arrays in local memory."""

    def __init__(self, w: WindowShape, tiled: TiledWindow) -> None:
        self.w = w
        self.t = tiled
        self.g = tiled.geo
        self.p = tiled.plan
        self.body: GroupBody = w.body
        self.ctype = compute_type(w.op.results[0])
        self.zero = float_literal(0.0, self.ctype)
        self.floating = self.ctype.startswith("float")
        self.stager = Stager(tiled.threads)
        self.grid_loops: frozenset[str] = frozenset()  # set by lines()
        self.out_words = self._words_out()
        self.held = self._hold_inputs()  # before any line reads them

    def lines(self) -> list[str]:
        """The schedule's body for image `o0` (z) and channel block `cy` (y;
        output channel `o1` when depthwise), each a grid-stride loop where it
        passes the grid limit (`codegen/launch_grid.py`)."""
        if self.t.mode == "pixels":
            body, channel = self._pixels(), "cy"
        elif self.t.mode == "general":
            body, channel = self._general(), "cy"
        else:
            body, channel = self._depthwise(), "o1"
        loops = [("o0", "z", self.g.n), (channel, "y", self.t.channel_blocks)]
        lines, self.grid_loops = block_index_lines(loops, body, reuses_shared=True)
        return self.held + lines

    def _hold_inputs(self) -> list[str]:
        """The one-element inputs of the staged input's prologue (a scalar
        added to every staged element) read once at the kernel's start
        (`hold_scalars`). The epilogue's are read where they are used: held
        from the start, they would hold a register through the whole kernel."""
        read = {v for op in prologue_ops(self.w.x) for v in op.operands}
        return hold_scalars(self.body, [a for a in self.body.args if a in read])

    def _channel_loop(self, tiles: list[Tile], compute: list[str]) -> list[str]:
        """The conv's channel steps around `compute` (run by the threads
        that own outputs)."""
        t = self.t
        return self.stager.channel_loop(tiles, self._owners(compute), t.steps, self.p.ci_step,
                                        t.prefetched)

    def _owners(self, lines: list[str]) -> list[str]:
        """`lines` for the threads that own outputs (not the staging helpers)."""
        lanes = self.t.lanes
        return guarded([f"tid < {int_literal(lanes)}"] if self.t.threads > lanes else [], lines)

    def _fma(self, acc: str, a: str, b: str) -> str:
        if self.floating:
            return f"{acc} = cuda.fma({a}, {b}, {acc})"
        return f"{acc} = {acc} + {a} * {b}"

    def _operand(self, v: SSAValue, flat: str, coords: list[str], suffix: str,
                 ) -> tuple[list[str], str]:
        """An element of operand `v`: `flat` indexes a group input; a value a
        prologue computes is evaluated at `coords` (variable names)."""
        if isinstance(v, BlockArgument):
            return [], load_expr(self.body, v, at(flat))
        return read_at(self.body, v, coords, suffix)

    # --- block origin, accumulators, the weight tile ----------------------------------------------

    def _conv_block_origin(self) -> list[str]:
        """The conv group and first output channel of channel block `cy`."""
        g, p = self.g, self.p
        per_group = -(-g.per_group_out // p.oc_t)
        if per_group == 1:
            lines = ["cg = cy", "ocl0 = 0"]
        else:
            lines = [f"cg = cy // {int_literal(per_group)}",
                     f"ocl0 = (cy % {int_literal(per_group)}) * {int_literal(p.oc_t)}"]
        return [
            "# the block's first output channel, within its conv group and overall",
            *lines,
            f"oc0 = {times('cg', g.per_group_out)} + ocl0",
            f"c_first = {times('cg', g.per_group_in)}",
        ]

    def _accumulators(self) -> list[str]:
        return [f"acc{i}_{j} = {self.zero}" for i in range(self.p.ot) for j in range(self.p.pt)]

    def _weight_tile(self) -> Tile:
        """`ws[ci * taps + tap][o]`: weight (oc0 + o, c0 + ci, tap), zero past
        the group's output or input channels. Read from memory along the
        taps and input channels (coalesced), stored transposed so that a
        thread's `ot` channels are adjacent: ptxas reads them with 16-byte
        loads, the rows padded by 16 bytes so the transposing stores spread
        over the banks."""
        g, p = self.g, self.p
        taps, weight = g.taps, self.w.op.operands[1]
        ragged_oc = g.per_group_out % p.oc_t != 0
        ragged_ci = g.per_group_in % p.ci_step != 0

        def read(plane: int, row: str, col: str, base: str, suffix: str,
                 ) -> tuple[list[str], str]:
            oc = f"ocl0 + {row}"
            if ragged_oc:
                oc = clamp(oc, None, g.per_group_out - 1)
            q = f"{times(base, taps)} + {col}"
            if ragged_ci:
                q = clamp(q, None, g.per_group_in * taps - 1)
            lines = [f"wo{suffix} = {times('cg', g.per_group_out)} + {oc}", f"wq{suffix} = {q}"]
            flat = f"wo{suffix} * {int_literal(g.per_group_in * taps)} + wq{suffix}"
            coords = [f"wo{suffix}", f"wc{suffix}", f"wa{suffix}", f"wb{suffix}"]
            reads, value = self._operand(weight, flat, coords, suffix)
            if not isinstance(weight, BlockArgument):
                lines += [f"wc{suffix} = wq{suffix} // {int_literal(taps)}",
                          f"wa{suffix} = (wq{suffix} % {int_literal(taps)}) // {int_literal(g.kw)}",
                          f"wb{suffix} = wq{suffix} % {int_literal(g.kw)}"]
            return lines + reads, value

        def valid(plane: int, row: str, col: str, base: str) -> list[str]:
            terms = [f"ocl0 + {row} < {int_literal(g.per_group_out)}"] if ragged_oc else []
            if ragged_ci:
                terms.append(f"{times(base, taps)} + {col} < {int_literal(g.per_group_in * taps)}")
            return terms

        return Tile("ws", "ws", p.oc_t, p.ci_step * taps, read, valid, self.zero,
                     transposed=True)

    def _weight_array(self) -> list[str]:
        """The weight tile, 16-byte aligned on the GPU (the simulator takes
        no alignment; the branch is resolved when numba compiles)."""
        shape = _shape(self.p.ci_step * self.g.taps, self.p.oc_t + weight_pad(self.g.item))
        return [f"if {SIMULATED}:",
                f"    ws = cuda.shared.array({shape}, {self.ctype})",
                "else:",
                f"    ws = cuda.shared.array({shape}, {self.ctype}, alignment=16)"]

    # --- the epilogue -----------------------------------------------------------------------------

    def _per_channel(self, v: SSAValue) -> bool:
        """Whether `v` is the same at every pixel of a channel: it does not
        depend on the window's result and broadcasts along H and W."""
        shape = (1, 1, 1, 1, *tensor_shape(v))[-4:]
        if shape[2:] != (1, 1) and tuple(self.w.out[2:]) != (1, 1):
            return False
        return all(op is not self.w.op for op in prologue_ops(v))

    def _epilogue(self, pixels: list[_Pixel]) -> list[str]:
        """Per output channel of the thread (values that depend only on the
        channel once), per pixel: the epilogue of the accumulator and the
        stores."""
        g, p, w = self.g, self.p, self.w
        lines = ["# epilogue in registers, then the stores"]
        for px in pixels:
            lines += px.lines
        for i in range(p.ot):
            if self.t.mode == "depthwise":
                oc, terms = "o1", []
            else:
                local = plus(times("lo", p.ot), i) if p.oc_t > p.ot else int_literal(i)
                oc = f"oc0 + {local}"
                terms = ([f"ocl0 + {local} < {int_literal(g.per_group_out)}"]
                         if g.per_group_out % p.oc_t else [])
            chan = PointEvaluator(w.body, w.out, ["o0", "o1", "0", "0"],
                                  loader=self._loader(None))

            def hoist(v: SSAValue, chan: PointEvaluator = chan) -> str | None:
                return chan.value(v) if self._per_channel(v) else None

            cells: list[str] = []
            for j, px in enumerate(pixels):
                acc = f"acc{i}_{j}"
                coords = ["o0", "o1", px.o2, px.o3]
                ev = PointEvaluator(w.body, w.out, coords, bound={w.op.results[0]: acc},
                                    loader=self._loader(px), hoist=hoist)
                cell: list[str] = []
                for k, v in enumerate(w.body.outputs):
                    val = ev.value(v)
                    cell += ev.take_lines()
                    cell += self._store_output(k, v, val, px)
                cells += guarded(px.terms, [*self._avg_divide(acc, px.o2, px.o3), *cell])
            head = [] if oc == "o1" else [f"o1 = {oc}"]
            lines += guarded(terms, [*head, *chan.take_lines(), *cells])
        return lines

    def _plane_index(self, shape: tuple[int, ...], px: _Pixel | None) -> str | None:
        """The flat index of a value of `shape` at the point, when its last
        two dimensions are the output plane or broadcast along both (the
        pixel's plane offset `px.flat` then stands for o2 and o3)."""
        out = self.w.out
        full = (1, 1, 1, 1, *shape)[-4:]
        if len(shape) > 4 or not (full[2:] == tuple(out[2:]) or full[2:] == (1, 1)):
            return None
        plane = full[2] * full[3]
        flat = px.flat if px is not None and plane > 1 else "0"
        return broadcast_index((full[0], full[1], plane), (out[0], out[1], plane),
                               ["o0", "o1", flat])

    def _loader(self, px: _Pixel | None) -> Loader:
        """Group inputs of the epilogue read with unsigned indices, through
        the pixel's plane offset where the shape allows."""

        def load(arg: BlockArgument, shape: tuple[int, ...], coords: Sequence[str]) -> str:
            index = self._plane_index(shape, px)
            if index is None:
                index = broadcast_index(shape, self.w.out, coords)
            return load_expr(self.body, arg, at(index))

        return load

    def _store_output(self, k: int, v: SSAValue, val: str, px: _Pixel) -> list[str]:
        """Output `k` of the group at the pixel: an output of the full result
        shape through the plane offset, any other as `store_lines` does; an
        output stored in words held in `y<o2>` (`_depthwise`)."""
        if self.out_words is not None:
            return [f"y{px.o2} = {val}"]
        if tuple(tensor_shape(v)) == tuple(self.w.out):
            index = self._plane_index(tuple(self.w.out), px)
            return [f"out{k}[{at(str(index))}] = {store_expr(v, val)}"]
        return store_lines(k, v, val, self.w.out, ["o0", "o1", px.o2, px.o3])

    def _avg_divide(self, acc: str, o2: str, o3: str) -> list[str]:
        """Average pooling: divide by the taps inside the input."""
        g = self.g
        if g.kind != "avg":
            return []
        if not any(g.pads):  # every window lies inside the input
            return [f"{acc} = {acc} / {float_literal(float(g.taps), self.ctype)}"]
        return [
            f"tr = {minus(times(o2, g.sh), g.pads[0])}",
            f"tc = {minus(times(o3, g.sw), g.pads[1])}",
            f"nr = max(0, min({int_literal(g.kh)}, {int_literal(g.h)} - tr) - max(0, -tr))",
            f"nc = max(0, min({int_literal(g.kw)}, {int_literal(g.w)} - tc) - max(0, -tc))",
            f"{acc} = {acc} / {self.ctype}(nr * nc)",
        ]

    # --- 1x1 conv: a GEMM over the pixels ---------------------------------------------------------

    def _pixel_tile(self) -> Tile:
        """`xs[ci][q]`: input channel c_first + c0 + ci at pixel pix0 + q."""
        g, p = self.g, self.p
        pixels = g.oh * g.ow
        ragged_ci = g.per_group_in % p.ci_step != 0
        ragged_px = pixels % p.tw != 0
        x = self.w.x

        def read(plane: int, row: str, col: str, base: str, suffix: str,
                 ) -> tuple[list[str], str]:
            ch = f"{base} + {row}"
            px = f"pix0 + {col}"
            lines = [f"xc{suffix} = c_first + "
                     f"{clamp(ch, None, g.per_group_in - 1) if ragged_ci else ch}",
                     f"xp{suffix} = {clamp(px, None, pixels - 1) if ragged_px else px}"]
            flat = f"(o0 * {int_literal(g.c_in)} + xc{suffix}) * {int_literal(pixels)} + xp{suffix}"
            coords = ["o0", f"xc{suffix}", f"xh{suffix}", f"xw{suffix}"]
            reads, value = self._operand(x, flat, coords, suffix)
            if not isinstance(x, BlockArgument):
                lines += [f"xh{suffix} = xp{suffix} // {int_literal(g.w)}",
                          f"xw{suffix} = xp{suffix} % {int_literal(g.w)}"]
            return lines + reads, value

        def valid(plane: int, row: str, col: str, base: str) -> list[str]:
            terms = [f"{base} + {row} < {int_literal(g.per_group_in)}"] if ragged_ci else []
            if ragged_px:
                terms.append(f"pix0 + {col} < {int_literal(pixels)}")
            return terms

        return Tile("xs", "xs", p.ci_step, p.tw, read, valid, self.zero)

    def _pixels(self) -> list[str]:
        g, p, t = self.g, self.p, self.t
        pixels = g.oh * g.ow
        lanes = t.pixel_lanes
        wrow = f"lo * {int_literal(p.ot)} + " if p.oc_t > p.ot else ""
        compute = [
            f"for ci in range({int_literal(p.ci_step)}):",
            *indent([f"x{j} = xs[{at('ci', plus('lp', j * lanes))}]" for j in range(p.pt)],
                    1),
            *indent([f"w{i} = ws[{at('ci', wrow + int_literal(i))}]" for i in range(p.ot)], 1),
            *indent([self._fma(f"acc{i}_{j}", f"x{j}", f"w{i}")
                     for i in range(p.ot) for j in range(p.pt)], 1),
        ]
        lines = [
            "tid = cuda.threadIdx.x",
            f"lp = tid % {int_literal(lanes)}",
            f"lo = tid // {int_literal(lanes)}",
            f"pix0 = {times('cuda.blockIdx.x', p.tw)}",
            *self._conv_block_origin(),
            f"xs = cuda.shared.array({_shape(p.ci_step, p.tw)}, {self.ctype})",
            *self._weight_array(),
            *self._accumulators(),
            *self._channel_loop([self._pixel_tile(), self._weight_tile()], compute),
        ]
        cells = []
        for j in range(p.pt):
            # o2 and o3 only where an operand broadcasts along one of them
            coord = [f"gp{j} = {plus('pix0 + lp', j * lanes)}",
                     f"o2_{j} = gp{j} // {int_literal(g.ow)}",
                     f"o3_{j} = gp{j} % {int_literal(g.ow)}"]
            terms = [f"gp{j} < {int_literal(pixels)}"] if pixels % p.tw else []
            cells.append(_Pixel(coord, f"o2_{j}", f"o3_{j}", f"gp{j}", terms))
        return lines + self._owners(self._epilogue(cells))

    # --- general conv and depthwise: a halo tile --------------------------------------------------

    def _halo_tile(self, channels: bool, pad: str) -> Tile:
        """`xs[ci * rows + r][q]` (or `xs[r][q]` for one channel): the input
        at (ih0 + r, iw0 + q) of channel c_first + c0 + ci (or `xch`). A
        position's clamped offset in the plane is computed once and shared
        by the step's channels."""
        g, p, x = self.g, self.p, self.w.x
        rows, cols = self.t.halo
        row_check, col_check = self.t.halo_checks
        ragged_ci = channels and g.per_group_in % p.ci_step != 0
        offsets: dict[tuple[str, str], str] = {}

        def read(plane: int, row: str, col: str, base: str, suffix: str,
                 ) -> tuple[list[str], str]:
            lines: list[str] = []
            if plane == 0:
                ih, iw = f"ih0 + {row}", f"iw0 + {col}"
                offsets[row, col] = f"xo{suffix}"
                lines += [f"xh{suffix} = {clamp(ih, 0, g.h - 1) if row_check else ih}",
                          f"xw{suffix} = {clamp(iw, 0, g.w - 1) if col_check else iw}",
                          f"xo{suffix} = xh{suffix} * {int_literal(g.w)} + xw{suffix}"]
            first = offsets[row, col]
            if channels:
                ch = plus(base, plane)
                lines.append(f"xc{suffix} = c_first + "
                             f"{clamp(ch, None, g.per_group_in - 1) if ragged_ci else ch}")
            else:
                lines.append(f"xc{suffix} = xch")
            flat = f"(o0 * {int_literal(g.c_in)} + xc{suffix}) * {int_literal(g.h * g.w)} + {first}"
            if isinstance(x, BlockArgument):
                return lines, load_expr(self.body, x, at(flat))
            name = first.replace("xo", "", 1)  # the plane's first element's suffix
            coords = ["o0", f"xc{suffix}", f"xh{name}", f"xw{name}"]
            reads, value = read_at(self.body, x, coords, suffix)
            return lines + reads, value

        def valid(plane: int, row: str, col: str, base: str) -> list[str]:
            terms = [f"{plus(base, plane)} < {int_literal(g.per_group_in)}"] if ragged_ci else []
            if row_check:
                terms.append(f"0 <= ih0 + {row} < {int_literal(g.h)}")
            if col_check:
                terms.append(f"0 <= iw0 + {col} < {int_literal(g.w)}")
            return terms

        return Tile("xs", "xs", rows, cols, read, valid, pad,
                     planes=p.ci_step if channels else 1)

    def _spatial_origin(self) -> list[str]:
        """The output tile of the block (x), the thread's column and first
        row, and the corner of the input tile (negative inside the padding)."""
        g, p = self.g, self.p
        _, tiles_w = self.t.spatial_tiles
        if tiles_w > 1:
            origin = [f"oh0 = {times(f'(cuda.blockIdx.x // {int_literal(tiles_w)})', p.th)}",
                      f"ow0 = {times(f'(cuda.blockIdx.x % {int_literal(tiles_w)})', p.tw)}"]
        else:
            origin = [f"oh0 = {times('cuda.blockIdx.x', p.th)}", "ow0 = 0"]
        return [
            f"col = lp % {int_literal(p.tw)}",
            f"r0 = (lp // {int_literal(p.tw)}) * {int_literal(p.pt)}",
            *origin,
            f"ih0 = {minus(times('oh0', g.sh), g.pads[0])}",
            f"iw0 = {minus(times('ow0', g.sw), g.pads[1])}",
            f"rb = {times('r0', g.sh)}",
        ]

    def _rows(self) -> dict[int, list[tuple[int, int]]]:
        """Distinct input-row offsets (from `rb`) a thread's taps touch, each
        with the (output row j, kernel row a) pairs that use it."""
        g, p = self.g, self.p
        rows: dict[int, list[tuple[int, int]]] = {}
        for a in range(g.kh):
            for j in range(p.pt):
                rows.setdefault(j * g.sh + a * g.dh, []).append((j, a))
        return dict(sorted(rows.items()))

    def _halo_pixels(self) -> list[_Pixel]:
        """The thread's output pixels (rows r0 + j of column `col`)."""
        g, p = self.g, self.p
        out = []
        for j in range(p.pt):
            terms = [f"o2_{j} < {int_literal(g.oh)}"] if g.oh % p.th else []
            if g.ow % p.tw:
                terms.append(f"o3 < {int_literal(g.ow)}")
            lines = [f"o2_{j} = {plus('oh0 + r0', j)}"]
            if j == 0:
                lines.insert(0, "o3 = ow0 + col")
            out.append(_Pixel(lines, f"o2_{j}", "o3", f"o2_{j} * {int_literal(g.ow)} + o3", terms))
        return out

    def _general(self) -> list[str]:
        g, p, t = self.g, self.p, self.t
        rows, cols = t.halo
        wrow = f"lo * {int_literal(p.ot)} + " if p.oc_t > p.ot else ""
        columns = self._general_tap_loops if t.looped_taps else self._general_columns
        inner = columns(wrow)
        compute = [
            f"cc = {times('col', g.sw)}",
            f"for ci in range({int_literal(p.ci_step)}):",
            f"    cr = {times('ci', rows)} + rb",
            *indent(inner, 1),
        ]
        lines = [
            "tid = cuda.threadIdx.x",
            f"lp = tid % {int_literal(t.pixel_lanes)}",
            f"lo = tid // {int_literal(t.pixel_lanes)}",
            *self._spatial_origin(),
            *self._conv_block_origin(),
            f"xs = cuda.shared.array({_shape(p.ci_step * rows, cols)}, {self.ctype})",
            *self._weight_array(),
            *self._accumulators(),
            *self._channel_loop([self._halo_tile(True, self.zero), self._weight_tile()],
                                compute),
        ]
        return lines + self._owners(self._epilogue(self._halo_pixels()))

    def _general_tap_loops(self, wrow: str) -> list[str]:
        """A large window (`TiledWindow.looped_taps`): loops over the kernel
        rows and columns, per tap the thread's `pt` inputs and `ot` weights."""
        g, p = self.g, self.p
        inner = [f"cb = cc + {times('b', g.dw)}"]
        inner += [f"x{j} = xs[{at(plus('ra', j * g.sh), 'cb')}]" for j in range(p.pt)]
        tap = f"{times('ci', g.taps)} + {times('a', g.kw)} + b"
        inner += [f"w{i} = ws[{at(tap, wrow + int_literal(i))}]" for i in range(p.ot)]
        inner += [self._fma(f"acc{i}_{j}", f"x{j}", f"w{i}")
                  for i in range(p.ot) for j in range(p.pt)]
        return [f"for a in range({int_literal(g.kh)}):",
                f"    ra = cr + {times('a', g.dh)}",
                f"    for b in range({int_literal(g.kw)}):", *indent(inner, 2)]

    def _general_columns(self, wrow: str) -> list[str]:
        """Per kernel column, each distinct input row read once and every
        kernel row's weights and FMAs unrolled."""
        g, p, t = self.g, self.p, self.t
        taps = g.taps
        # the kernel columns: unrolled (literal offsets) for small windows,
        # a loop for large ones (a body ptxas would fill with loads in flight)
        unrolled = t.unrolled_columns
        inner: list[str] = []
        for b in range(g.kw) if unrolled else [-1]:
            col = "b" if b < 0 else str(b)
            cb = plus("cc", b * g.dw) if b >= 0 else f"cc + {times('b', g.dw)}"
            inner += [f"x{u} = xs[{at(plus('cr', u), cb)}]" for u in self._rows()]
            for a in range(g.kh):
                tap = (plus(times("ci", taps), a * g.kw + b) if b >= 0
                       else f"{plus(times('ci', taps), a * g.kw)} + {col}")
                inner += [f"w{i} = ws[{at(tap, wrow + int_literal(i))}]" for i in range(p.ot)]
                inner += [self._fma(f"acc{i}_{j}", f"x{j * g.sh + a * g.dh}", f"w{i}")
                          for i in range(p.ot) for j in range(p.pt)]
        if not unrolled:
            inner = [f"for b in range({int_literal(g.kw)}):", *indent(inner, 1)]
        return inner

    # --- depthwise conv and pools: one channel per block ------------------------------------------

    def _depthwise(self) -> list[str]:
        g, p, t = self.g, self.p, self.t
        rows, cols = t.halo
        kind = g.kind
        pad = float_literal(-float("inf"), self.ctype) if kind == "max" else self.zero
        tile = self._halo_tile(False, pad)
        setup, elements = self.stager.elements([tile])
        multiplier = g.per_group_out if kind == "conv" else 1
        scalar = [*self.stager.stage(elements, "0"), *self.stager.stage_loops([tile], "0")]
        staged = self._wide_or(scalar, pad)
        lines = [
            "tid = cuda.threadIdx.x",
            "lp = tid",
            # a conv's output channel o1 reads input channel o1 // multiplier
            f"xch = o1 // {int_literal(multiplier)}" if multiplier > 1 else "xch = o1",
            *self._spatial_origin(),
            f"xs = cuda.shared.array({_shape(rows, cols)}, {self.ctype})",
            "# stage the channel's halo tile",
            *(setup if staged is scalar else []),  # the words place their own elements
        ]
        unrolled = t.unrolled_taps
        if kind == "conv" and unrolled:
            lines.append("# the window's weights, in registers")
            for a in range(g.kh):
                for b in range(g.kw):
                    lines += self._depthwise_weight(f"w{a}_{b}", str(a), str(b))
        lines += [
            *staged,
            "cuda.syncthreads()",
            *[f"acc0_{j} = {pad}" for j in range(p.pt)],
        ]
        taps = self._depthwise_taps() if unrolled else self._depthwise_tap_loops()
        pixels = self._halo_pixels()
        if self.out_words is None:
            return lines + self._owners(taps + self._epilogue(pixels))
        # the results held until every tap is read, then passed through the
        # halo tile and stored in words (`codegen/window_out_words.py`)
        k, dtype, lanes = self.out_words
        held = [f"y{px.o2} = {self.zero}" for px in pixels]
        put = [line for j, px in enumerate(pixels)
               for line in guarded(px.terms, [f"xs[{at(plus('r0', j), 'col')}] = y{px.o2}"])]
        return [*lines, *held, *self._owners(taps + self._epilogue(pixels)),
                "cuda.syncthreads()  # every tap read: the tile takes the results",
                *self._owners([*pixels[0].lines[:1], *put]), "cuda.syncthreads()",
                *out_word_lines(self.t, k, dtype, lanes, self.zero)]

    def _words_out(self) -> tuple[int, str, int] | None:
        """(output, device dtype, lanes) of a depthwise or pool block that
        stores its one output in words (`out_lanes`), or None."""
        outputs = self.w.body.outputs
        if self.t.mode != "depthwise" or len(outputs) != 1:
            return None
        v = outputs[0]
        if tuple(tensor_shape(v)) != tuple(self.w.out) or compute_type(v) != "float32":
            return None
        dtype = dtype_name(v)
        lanes = out_lanes(self.t, dtype)
        return None if lanes == 1 else (0, dtype, lanes)

    def _wide_or(self, scalar: list[str], pad: str) -> list[str]:
        """The halo tile staged in words where its arrays are aligned, else
        by `scalar` (element by element): a one-across tile as one flat run
        (`codegen/window_flat_staging.py`), another row by row
        (`codegen/window_wide_staging.py`); `scalar` alone when the plan
        stages it element by element."""
        dtype = dtype_name(self.w.x)
        flat = flat_lanes(self.t, dtype)
        lanes = flat if flat > 1 else stage_lanes(self.t, dtype)
        if lanes == 1:
            return scalar
        halo = (FlatHalo if flat > 1 else WideHalo)(self.w, self.t, lanes, pad)
        wide = halo.lines(self.body, self.stager)
        if wide is None:
            return scalar
        bounds, test = halo.test()
        # the blocks whose words may not be read load the same words' lanes
        # one by one: an element-by-element staging of the tile would hold
        # more registers, which every block would then be given
        scalar = halo.lone_lines(self.body, self.stager) or scalar
        pads = halo.pad_columns(self.stager) if isinstance(halo, FlatHalo) else []
        return [*bounds, f"if {test}:  # {lanes}-element words",
                *indent(wide, 1), "else:", *indent(scalar, 1), *pads]

    def _depthwise_weight(self, name: str, a: str, b: str) -> list[str]:
        """`name` = weight (o1, 0, a, b) of a depthwise conv (`a`, `b`
        literals or loop variables)."""
        g = self.g
        if a.isdigit() and b.isdigit():
            flat = plus(times("o1", g.taps), int(a) * g.kw + int(b))
        else:
            flat = f"{times('o1', g.taps)} + {times(a, g.kw)} + {b}"
        reads, val = self._operand(self.w.op.operands[1], flat, ["o1", "0", a, b], f"_{name}")
        return [*reads, f"{name} = {val}"]

    def _tap_line(self, j: int, x: str, weight: str) -> str:
        acc = f"acc0_{j}"
        if self.g.kind == "conv":
            return self._fma(acc, x, weight)
        if self.g.kind == "max":
            return f"{acc} = {max_expr(acc, x, self.ctype)}"
        return f"{acc} = {acc} + {x}"

    def _depthwise_taps(self) -> list[str]:
        """Every tap unrolled: per kernel column, each distinct input row read once."""
        g = self.g
        lines: list[str] = []
        for b in range(g.kw):
            lines.append(f"cb = {plus(times('col', g.sw), b * g.dw)}")
            for u, uses in self._rows().items():
                lines.append(f"x{u} = xs[{at(plus('rb', u), 'cb')}]")
                lines += [self._tap_line(j, f"x{u}", f"w{a}_{b}") for j, a in uses]
        return lines

    def _depthwise_tap_loops(self) -> list[str]:
        """A large window: loops over the taps, a conv's weight read per tap."""
        g, p = self.g, self.p
        inner: list[str] = []
        if g.kind == "conv":
            inner += self._depthwise_weight("wt", "a", "b")
        inner.append(f"cb = {times('col', g.sw)} + {times('b', g.dw)}")
        for j in range(p.pt):
            row = f"{plus('rb', j * g.sh)} + {times('a', g.dh)}"
            inner += [f"xt = xs[{at(row, 'cb')}]",
                      self._tap_line(j, "xt", "wt")]
        return [f"for a in range({int_literal(g.kh)}):",
                f"    for b in range({int_literal(g.kw)}):", *indent(inner, 2)]
