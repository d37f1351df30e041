"""A depthwise conv or pool tile as wide as the output stages the whole
image rows it covers as one flat run of 16-byte words (4 f32, 8 bf16 or
f16: `codegen/window_flat_staging.py`), its padding columns stored without
loads, and stores its outputs in words where they divide an output row
(`codegen/window_out_words.py`): avg and max pools, strides 1 and 2, symmetric and one-sided pads, a
1-D window, odd widths (a word straddles rows) and widths of whole words,
the tile's last image columns unused, with a pointwise neighbour before or
after; through `fusec` (compile, then `run --check` against the reference
interpreter on fresh random inputs), one kernel each."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from fusec.codegen.generate import generate_program
from fusec.codegen.ptx import compile_program_ptx
from fusec.compiler.compile_pipeline import PipelineOptions, default_pipeline
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.compiler.verify import verify_module
from fusec.scheduling.window_plan import TiledWindow, WindowGeometry, WindowPlan
from fusec.scheduling.window_stage_lanes import flat_lanes, flat_passes, pad_columns
from tests.test_window_wide_staging import _compile_and_check


def _extent(size: int, k: int, s: int, lo: int, hi: int) -> int:
    return (size + lo + hi - k) // s + 1


AFTER = "after"  # + 0.125 on the pool's result (the corpus's strided avg pool)
SILU = "silu"  # silu before the pool: read from the words' lanes
BIAS = "bias"  # + a per-image bias before the pool: read at the element's coordinates


def _pool(pool: str, dtype: str, x: tuple[int, int, int, int], k: tuple[int, int],
          strides: tuple[int, int], pads: tuple[int, int, int, int], neighbour: str) -> str:
    n, c, h, w = x
    oh = _extent(h, k[0], strides[0], pads[0], pads[2])
    ow = _extent(w, k[1], strides[1], pads[1], pads[3])
    t = f"tensor<{n}x{c}x{h}x{w}x{dtype}>"
    o = f"tensor<{n}x{c}x{oh}x{ow}x{dtype}>"
    b = f"tensor<{n}x1x1x1x{dtype}>"
    attrs = (f"kernel = [{k[0]}, {k[1]}], strides = [{strides[0]}, {strides[1]}], "
             f"pads = [{pads[0]}, {pads[1]}, {pads[2]}, {pads[3]}]")
    before = {SILU: f"%p = nn.silu %x : {t}",
              BIAS: f"%p = nn.add %x, %b : ({t}, {b}) -> {t}"}.get(neighbour)
    src = "%p" if before else "%x"
    lines = [f"func.func @f(%x: {t}, %b: {b}) -> {o} {{"]
    if before:
        lines.append(f"  {before}")
    lines.append(f"  %y = nn.{pool} {src} {{{attrs}}} : ({t}) -> {o}")
    result = "%y"
    if neighbour == AFTER:
        lines += [f"  %c = nn.constant dense<0.125> : tensor<{dtype}>",
                  f"  %z = nn.add %y, %c : ({o}, tensor<{dtype}>) -> {o}"]
        result = "%z"
    lines += [f"  func.return {result} : {o}", "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("pool", "dtype", "x", "k", "strides", "pads", "neighbour"), [
    # the corpus's strided avg pool: rows of one word, a padding column each side;
    # output words over two rows, aligned (8 output rows) or not (7)
    ("avg_pool2d", "bf16", (3, 2, 13, 8), (3, 3), (2, 2), (1, 1, 1, 1), AFTER),
    ("avg_pool2d", "bf16", (2, 3, 16, 8), (3, 3), (2, 2), (1, 1, 1, 1), AFTER),
    # odd widths: words straddle rows
    ("avg_pool2d", "f16", (2, 3, 11, 13), (3, 3), (2, 2), (1, 1, 1, 1), SILU),
    ("max_pool2d", "f32", (2, 3, 7, 9), (3, 3), (1, 1), (1, 1, 1, 1), AFTER),
    # rows narrower than a word: each lane placed by a division
    ("max_pool2d", "bf16", (2, 3, 6, 5), (3, 3), (1, 1), (1, 1, 1, 1), SILU),
    # rows of whole f32 words, no padding, a bias read at the coordinates
    ("avg_pool2d", "f32", (2, 3, 10, 12), (2, 2), (2, 2), (0, 0, 0, 0), BIAS),
    # a 1-D window along W
    ("max_pool2d", "bf16", (2, 3, 5, 17), (1, 3), (1, 2), (0, 1, 0, 1), BIAS),
    # padding on the right only; the image's last column unused by the tile
    ("avg_pool2d", "bf16", (2, 3, 9, 16), (3, 3), (2, 2), (0, 0, 1, 1), SILU),
    ("max_pool2d", "f16", (2, 3, 6, 9), (2, 2), (2, 2), (0, 0, 0, 0), AFTER),
    # f32 output rows of two words
    ("avg_pool2d", "f32", (2, 3, 9, 16), (3, 3), (2, 2), (1, 1, 1, 1), AFTER),
])
def test_a_one_across_pool_stages_a_flat_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], pool: str, dtype: str,
        x: tuple[int, int, int, int], k: tuple[int, int], strides: tuple[int, int],
        pads: tuple[int, int, int, int], neighbour: str) -> None:
    text = _pool(pool, dtype, x, k, strides, pads, neighbour)
    launches, kernels = _compile_and_check(tmp_path, capsys, text, seed=sum(x) + k[1])
    assert launches == 1
    lanes = 4 if dtype == "f32" else 8
    # words under the bounds test alone (the runtime aligns every array)
    assert "if xf_lo >= 0 and " in kernels and "is_aligned(" not in kernels.split("@cuda.jit")[-1]
    assert re.search(r"ld_(vec4_\w+|wide\d+)\(in0,", kernels)
    assert f"{lanes}-element words" in kernels
    # the outputs leave in words where the block's run spans two of them
    ow = _extent(x[3], k[1], strides[1], pads[1], pads[3])
    th = int(re.search(r"block tile (\d+)x", kernels).group(1))  # type: ignore[union-attr]
    out = f"{lanes}-element words of its contiguous rows"
    assert (out in kernels) == (th * ow >= 2 * lanes)


def test_a_one_across_depthwise_conv_stages_a_flat_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The corpus's 1-D strided depthwise conv in bf16, a prologue before it."""
    t, o, wt = ("tensor<2x3x7x11xbf16>", "tensor<2x3x7x6xbf16>", "tensor<3x1x1x3xbf16>")
    text = f"""
func.func @f(%x: {t}, %w: {wt}) -> {o} {{
  %c = nn.constant dense<0.5> : tensor<bf16>
  %p = nn.add %x, %c : ({t}, tensor<bf16>) -> {t}
  %y = nn.conv2d %p, %w {{strides = [1, 2], pads = [0, 1, 0, 1], dilations = [1, 1],
      groups = 3}} : ({t}, {wt}) -> {o}
  func.return %y : {o}
}}
"""
    launches, kernels = _compile_and_check(tmp_path, capsys, text, seed=11)
    assert launches == 1
    assert "xf_lo >= 0" in kernels and "8-element words" in kernels


def _tiled(kind: str, w: int, ow: int, tw: int, item_pads: tuple[int, int, int, int],
           ) -> TiledWindow:
    geo = WindowGeometry(kind, 2, 4, 64, w, 4, 32, ow, 3, 3, 2, 2, 1, 1,  # type: ignore[arg-type]
                         item_pads, 4, 4)
    return TiledWindow(geo, WindowPlan(16, tw, 1, 1, 2, 1))


def test_flat_lanes_take_the_widest_words_of_a_one_across_tile() -> None:
    one_across = _tiled("avg", 8, 4, 4, (1, 1, 1, 1))
    assert flat_lanes(one_across, "uint16") == 8 and flat_lanes(one_across, "float32") == 4
    assert pad_columns(one_across) == (1, 0)  # 9 columns: the left padding and 8 of the image
    words, pads = flat_passes(one_across, 8)
    assert (words, pads) == (2, 2)  # 33 rows of one word, 33 padding elements on 32 threads
    # two tiles across: the block's first column varies, staged row by row
    assert flat_lanes(_tiled("max", 200, 100, 50, (1, 1, 1, 1)), "uint16") == 1
    # f64 has no wide words
    assert flat_lanes(one_across, "float64") == 1


MIXED = """
func.func @f(%x: tensor<2x3x9x13xf32>, %y: tensor<2x3x9x13xbf16>) -> tensor<2x3x5x7xbf16> {
  %c = nn.cast %x : (tensor<2x3x9x13xf32>) -> tensor<2x3x9x13xbf16>
  %s = nn.add %c, %y : (tensor<2x3x9x13xbf16>, tensor<2x3x9x13xbf16>) -> tensor<2x3x9x13xbf16>
  %p = nn.max_pool2d %s {kernel = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]}
      : (tensor<2x3x9x13xbf16>) -> tensor<2x3x5x7xbf16>
  func.return %p : tensor<2x3x5x7xbf16>
}
"""
MULTIPLIER = """
func.func @f(%x: tensor<2x3x9x12xbf16>, %w: tensor<6x1x3x3xbf16>) -> tensor<2x6x9x12xbf16> {
  %y = nn.conv2d %x, %w {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 3}
      : (tensor<2x3x9x12xbf16>, tensor<6x1x3x3xbf16>) -> tensor<2x6x9x12xbf16>
  %r = nn.relu %y : tensor<2x6x9x12xbf16>
  func.return %r : tensor<2x6x9x12xbf16>
}
"""
TWO_OUTPUTS = """
func.func @f(%x: tensor<2x3x9x16xf16>) -> (tensor<2x3x5x8xf16>, tensor<2x3x5x8xf16>) {
  %p = nn.avg_pool2d %x {kernel = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]}
      : (tensor<2x3x9x16xf16>) -> tensor<2x3x5x8xf16>
  %r = nn.relu %p : tensor<2x3x5x8xf16>
  func.return %p, %r : tensor<2x3x5x8xf16>, tensor<2x3x5x8xf16>
}
"""


@pytest.mark.parametrize(("text", "wide", "out_words"), [
    # a prologue with an f32 input: the bf16 input from the words, the f32 one per element
    (MIXED, "in1", True),
    # a channel multiplier of 2: output channel o1 stages input channel o1 // 2
    (MULTIPLIER, "in0", True),
    # two outputs: staged in words, each stored element by element
    (TWO_OUTPUTS, "in0", False),
], ids=["mixed-prologue", "multiplier", "two-outputs"])
def test_a_flat_run_with_other_operands(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        text: str, wide: str, out_words: bool) -> None:
    launches, kernels = _compile_and_check(tmp_path, capsys, text, seed=len(text))
    assert launches == 1
    assert "if xf_lo >= 0 and " in kernels
    assert re.search(rf"ld_(vec4_\w+|wide\d+)\({wide},", kernels)
    assert ("words of its contiguous rows" in kernels) == out_words


# The corpus's strided avg pool (3x3, stride 2, + 0.125) and strided 5x5 depthwise conv
# (silu before it), full size: compiled for sm_90, never run.
CORPUS_POOL = """
func.func @f(%x: tensor<111x13x4976x8xbf16>) -> tensor<111x13x2488x4xbf16> {
  %y = nn.avg_pool2d %x {kernel = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]}
      : (tensor<111x13x4976x8xbf16>) -> tensor<111x13x2488x4xbf16>
  %c = nn.constant dense<0.125> : tensor<bf16>
  %z = nn.add %y, %c : (tensor<111x13x2488x4xbf16>, tensor<bf16>) -> tensor<111x13x2488x4xbf16>
  func.return %z : tensor<111x13x2488x4xbf16>
}
"""
CORPUS_CONV = """
func.func @f(%x: tensor<11x757x151x29xbf16>, %w: tensor<757x1x5x5xbf16>)
    -> tensor<11x757x76x15xbf16> {
  %s = nn.silu %x : tensor<11x757x151x29xbf16>
  %y = nn.conv2d %s, %w {strides = [2, 2], pads = [2, 2, 2, 2], dilations = [1, 1],
      groups = 757} : (tensor<11x757x151x29xbf16>, tensor<757x1x5x5xbf16>)
      -> tensor<11x757x76x15xbf16>
  func.return %y : tensor<11x757x76x15xbf16>
}
"""


@pytest.mark.slow  # PTX and ptxas for two large kernels
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas")
@pytest.mark.parametrize(("text", "most"), [
    # 32: 16 blocks of 128 threads fit an SM (64K registers)
    (CORPUS_POOL, 32),
    # element-by-element blocks kept beside the words held 96; the flat run's lanes, 61
    (CORPUS_CONV, 64),
], ids=["avg-pool", "depthwise-conv"])
def test_the_flat_staging_holds_no_more_registers_than_its_words(text: str, most: int) -> None:
    """The blocks whose words may not be read stage the same run lane by
    lane, and a run's output lanes are read as they are placed: neither
    holds more registers than the words, which ptxas gives every block."""
    ctx = make_context()
    module = parse_module(ctx, text, "corpus.mlir")
    verify_module(module)
    spec = default_pipeline(make_registry([]), PipelineOptions(target="h200"))
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), spec)).run(module)
    program = generate_program(module)
    (kernel,) = compile_program_ptx(program).values()
    assert kernel["spill_bytes"] == 0
    assert 0 < int(kernel["registers"]) <= most, kernel["registers"]
