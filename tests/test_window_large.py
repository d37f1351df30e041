"""Large windows (a ViT 16x16 patch convolution): the taps and the staging
of the tiled window kernels are Python loops past `UNROLL_BUDGET`, so the
kernel text stays small and numba compiles it quickly; small windows keep
their unrolled code."""

from __future__ import annotations

from fusec.codegen.kernel_source import KERNEL_PRELUDE
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects import nn
from fusec.dialects.shapes import conv2d_shape
from fusec.scheduling.window_plan import UNROLL_BUDGET, TiledWindow, WindowPlan, geometry
from tests.codegen_harness import check_program, compile_text, tensor
from tests.test_window_tiled import recorded_group

FULL = ("decompose,form-fusion-groups{target=h200},group-each-op,register-budget,"
        "tile-and-promote")


def conv_bias_program(x: tuple[int, int, int, int], w: tuple[int, int, int, int],
                      strides: list[int], pads: list[int]) -> str:
    """`@f`: a conv plus a per-channel bias."""
    out = conv2d_shape(x, w, strides, pads, [1, 1], 1)
    xt, wt, ot, bt = tensor(x), tensor(w), tensor(out), tensor((1, w[0], 1, 1))
    attrs = f"strides = {strides}, pads = {pads}, dilations = [1, 1], groups = 1"
    return f"""
func.func @f(%x: {xt}, %w: {wt}, %b: {bt}) -> {ot} {{
  %y = nn.conv2d %x, %w {{{attrs}}} : ({xt}, {wt}) -> {ot}
  %z = nn.add %y, %b : ({ot}, {bt}) -> {ot}
  func.return %z : {ot}
}}"""


def test_patch_conv_loops_over_taps() -> None:
    """A 16x16 stride-16 patch conv with a bias: one kernel, its taps in
    loops, the numbers of the reference."""
    text = conv_bias_program((1, 3, 32, 32), (8, 3, 16, 16), [16, 16], [0, 0, 0, 0])
    program = check_program(text, pipeline=FULL)
    src = program.kernels_source
    assert "for a in range(16):" in src and "for b in range(16):" in src
    assert "x4 = xs" not in src  # one tap's pt inputs per iteration, not a column's 64 rows


def test_overlapping_padded_patch_conv() -> None:
    """Stride 8 with padding 4: windows overlap and run into the padding."""
    text = conv_bias_program((1, 3, 24, 24), (4, 3, 16, 16), [8, 8], [4, 4, 4, 4])
    program = check_program(text, pipeline=FULL)
    assert "for a in range(16):" in program.kernels_source


def test_looped_staging() -> None:
    """A recorded plan whose thread stages more than `UNROLL_BUDGET`
    elements of a tile per step (32 threads, 2 channels of a 32x48 halo:
    96; the 64 weights stay unrolled): the input staging is a loop over
    both channels of the step (the last step ragged), and the numbers
    still match."""
    x, w = (1, 3, 32, 48), (4, 3, 16, 16)
    text = recorded_group(x, w, "strides = [16, 16]", [2, 3, 4, 2], [2, 4])
    module = parse_module(make_context(), text, "t.mlir")
    conv = next(op for op in module.walk() if isinstance(op, nn.Conv2dOp))
    tiled = TiledWindow(geometry(conv), WindowPlan(2, 3, 4, 2, 2, 4))
    assert max(tiled.staged_tiles) > UNROLL_BUDGET and tiled.looped_staging
    assert tiled.staged_in_flight < tiled.staged_per_thread
    src = check_program(text).kernels_source
    assert src.count("staged in a loop") == 1 and "xs_pl = xs_e // " in src
    assert "ws_v63 = " in src  # the weights: unrolled batches


def test_small_windows_stay_unrolled() -> None:
    """A 7x7 conv keeps today's code: a column's rows unrolled, staging in
    unrolled batches."""
    text = conv_bias_program((1, 8, 14, 14), (8, 8, 7, 7), [1, 1], [3, 3, 3, 3])
    src = compile_text(text, FULL).kernels_source
    assert "for a in range(" not in src and "staged in a loop" not in src


def test_full_size_patch_conv_kernel_is_small() -> None:
    """The ViT-B/16 patch embedding (8x3x224x224, 768 channels): the
    generated kernels.py stays small (it was ~3,500 lines of unrolled taps
    and staging, which numba took minutes to compile)."""
    text = conv_bias_program((8, 3, 224, 224), (768, 3, 16, 16), [16, 16], [0, 0, 0, 0])
    program = compile_text(text, FULL)
    src = program.kernels_source
    assert src.startswith(KERNEL_PRELUDE)  # the prelude's helpers are not the kernel's size
    assert len(src[len(KERNEL_PRELUDE):].splitlines()) < 300
    assert "staged in a loop" in src and "for b in range(16):" in src
