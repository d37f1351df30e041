"""Depthwise convs and pools stage their halo tile in aligned words (the
blocks whose words may not be read load the same lanes one by one): a tile as wide as the
output as one flat run of 16-byte words (`codegen/window_flat_staging.py`),
a narrower one row by row in words of 4 (f32: 16 bytes; bf16, f16: 8 bytes)
input elements (`codegen/window_wide_staging.py`). Strided, dilated and 1-D
windows, odd and prime extents (rows that straddle words, an array whose
size is no multiple of a word), asymmetric pads, with and without a
pointwise prologue; through `fusec` (compile, then `run --check` against
the reference interpreter on fresh random inputs), one kernel each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fusec.compiler.cli import main


def _compile_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                       seed: int) -> tuple[int, str]:
    """(kernel launches, kernels.py) of `text` compiled by `fusec`, after
    `fusec run --check` compared it with the reference interpreter."""
    model, out = tmp_path / "model.mlir", tmp_path / "out"
    model.write_text(text)
    assert main([str(model), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["run", str(out), "--check", "--device", "sim", "--seed", str(seed)]) == 0
    captured = capsys.readouterr()
    said = captured.out + captured.err
    assert "Traceback" not in said and "check passed" in said, said
    plan = json.loads((out / "plan.json").read_text())
    return len(plan["functions"]["f"]["launches"]), (out / "kernels.py").read_text()


def _conv(dtype: str, x: tuple[int, int, int, int], k: tuple[int, int], strides: list[int],
          dilations: list[int], pads: list[int], prologue: str) -> str:
    n, c, h, w = x
    kh, kw = k
    oh = (h + pads[0] + pads[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (w + pads[1] + pads[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    t = f"tensor<{n}x{c}x{h}x{w}x{dtype}>"
    o = f"tensor<{n}x{c}x{oh}x{ow}x{dtype}>"
    # without a prologue the window reads the group input itself
    body = prologue.format(t=t, dtype=dtype, n=n) if prologue else ""
    src = "%p" if prologue else "%x"
    return f"""
func.func @f(%x: {t}, %w: tensor<{c}x1x{kh}x{kw}x{dtype}>, %b: tensor<{n}x1x1x1x{dtype}>)
    -> {o} {{
  {body}
  %y = nn.conv2d {src}, %w {{strides = {strides}, pads = {pads}, dilations = {dilations},
      groups = {c}}} : ({t}, tensor<{c}x1x{kh}x{kw}x{dtype}>) -> {o}
  %s = nn.add %y, %b : ({o}, tensor<{n}x1x1x1x{dtype}>) -> {o}
  func.return %s : {o}
}}
"""


SILU = "%p = nn.silu %x : {t}"
BIAS = "%p = nn.add %x, %b : ({t}, tensor<{n}x1x1x1x{dtype}>) -> {t}"
TANH = "%p = nn.tanh %x : {t}"
HALF = ("%c = nn.constant dense<0.5> : tensor<{dtype}>\n"
        "  %p = nn.add %x, %c : ({t}, tensor<{dtype}>) -> {t}")


@pytest.mark.parametrize(("dtype", "x", "k", "strides", "dilations", "pads", "prologue"), [
    # dilated 3x3, dilation 3: a halo of 6 rows and columns
    ("bf16", (2, 3, 13, 11), (3, 3), [1, 1], [3, 3], [3, 3, 3, 3], BIAS),
    ("bf16", (2, 3, 12, 16), (3, 3), [1, 1], [3, 3], [3, 3, 3, 3], HALF),
    ("f32", (2, 3, 11, 9), (3, 3), [1, 1], [2, 2], [2, 1, 1, 2], BIAS),
    ("f16", (1, 2, 7, 23), (3, 3), [1, 1], [3, 2], [3, 2, 3, 2], ""),
    # strided 5x5 with a silu prologue; 1-D windows along W
    ("bf16", (1, 3, 15, 13), (5, 5), [2, 2], [1, 1], [2, 2, 2, 2], SILU),
    ("f32", (2, 3, 7, 22), (1, 3), [1, 2], [1, 1], [0, 1, 0, 1], TANH),
    ("bf16", (3, 5, 5, 11), (1, 3), [1, 2], [1, 1], [0, 1, 0, 1], ""),
    ("f16", (2, 3, 5, 17), (1, 3), [1, 2], [1, 1], [0, 2, 0, 1], SILU),
    # outputs wider than a tile (two tiles across): row by row
    ("bf16", (1, 3, 3, 131), (1, 3), [1, 1], [1, 1], [0, 1, 0, 1], SILU),
    ("f32", (1, 3, 5, 70), (3, 3), [1, 1], [1, 1], [1, 1, 1, 1], BIAS),
])
def test_a_depthwise_conv_stages_words(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], dtype: str,
        x: tuple[int, int, int, int], k: tuple[int, int], strides: list[int],
        dilations: list[int], pads: list[int], prologue: str) -> None:
    text = _conv(dtype, x, k, strides, dilations, pads, prologue)
    launches, kernels = _compile_and_check(tmp_path, capsys, text, seed=sum(x))
    assert launches == 1
    # one tile across: a flat run of 16-byte words; else rows of 4-element words
    across = x[3] > 64
    lanes = 4 if across or dtype == "f32" else 8
    assert f"{lanes}-element words" in kernels
    assert "is_aligned(" not in kernels.split("@cuda.jit")[-1]  # the runtime aligns arrays
    assert ("xq_lo" in kernels) == across and ("xf_lo" in kernels) != across


@pytest.mark.parametrize(("pool", "dtype", "attrs", "x", "out"), [
    ("max_pool2d", "bf16", "kernel = [3, 3], strides = [2, 2], pads = [1, 0, 0, 1]",
     (2, 3, 13, 17), (6, 8)),
    ("avg_pool2d", "f32", "kernel = [1, 3], strides = [1, 2], pads = [0, 1, 0, 1]",
     (1, 3, 5, 19), (5, 10)),
    ("max_pool2d", "f16", "kernel = [2, 2], strides = [2, 2], pads = [0, 0, 0, 0]",
     (1, 2, 6, 22), (3, 11)),
    # two tiles across: rows of words, the padding counted out of the average
    ("avg_pool2d", "bf16", "kernel = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1]",
     (1, 2, 3, 70), (3, 70)),
])
def test_a_pool_with_a_prologue_stages_words(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], pool: str, dtype: str,
        attrs: str, x: tuple[int, int, int, int], out: tuple[int, int]) -> None:
    n, c, h, w = x
    t = f"tensor<{n}x{c}x{h}x{w}x{dtype}>"
    o = f"tensor<{n}x{c}x{out[0]}x{out[1]}x{dtype}>"
    text = f"""
func.func @f(%x: {t}, %b: tensor<{n}x1x1x1x{dtype}>) -> {o} {{
  %a = nn.add %x, %b : ({t}, tensor<{n}x1x1x1x{dtype}>) -> {t}
  %p = nn.tanh %a : {t}
  %y = nn.{pool} %p {{{attrs}}} : ({t}) -> {o}
  func.return %y : {o}
}}
"""
    launches, kernels = _compile_and_check(tmp_path, capsys, text, seed=h * w)
    assert launches == 1
    lanes = 4 if w > 64 or dtype == "f32" else 8
    assert f"{lanes}-element words" in kernels


@pytest.mark.parametrize(("op", "dtype", "x", "attrs", "wshape", "tile"), [
    # a dilated 3x3 (dilation 4: 8 halo rows) with a silu prologue
    ("conv2d", "bf16", (1, 2, 45, 33),
     "strides = [1, 1], pads = [4, 4, 4, 4], dilations = [4, 4], groups = 2", "2x1x3x3", 48),
    ("conv2d", "f32", (2, 3, 41, 31),
     "strides = [1, 1], pads = [3, 2, 3, 4], dilations = [3, 3], groups = 3", "3x1x3x3", 48),
    # a 7x7 window, stride 1: 6 halo rows (a pool keeps 4 rows per thread)
    ("max_pool2d", "f16", (1, 3, 37, 29), "kernel = [7, 7], strides = [1, 1], "
     "pads = [3, 3, 3, 3]", "", 16),
])
def test_a_deep_halo_gets_a_deeper_tile(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], op: str, dtype: str,
        x: tuple[int, int, int, int], attrs: str, wshape: str, tile: int) -> None:
    """A window whose halo rows would make a block stage over 1.5 times the
    input it needs gets a deeper tile of `tile` rows (`_deeper_halo_tile`):
    8 rows per thread for a conv, 4 for a pool."""
    n, c, h, w = x
    t = f"tensor<{n}x{c}x{h}x{w}x{dtype}>"
    o = f"tensor<{n}x{c}x{h}x{w}x{dtype}>"  # every case keeps the image's extent
    weight = f", %w: tensor<{wshape}x{dtype}>" if wshape else ""
    operands = "%p, %w" if wshape else "%p"
    types = f"({t}, tensor<{wshape}x{dtype}>)" if wshape else f"({t})"
    text = f"""
func.func @f(%x: {t}{weight}) -> {o} {{
  %p = nn.silu %x : {t}
  %y = nn.{op} {operands} {{{attrs}}} : {types} -> {o}
  func.return %y : {o}
}}
"""
    launches, kernels = _compile_and_check(tmp_path, capsys, text, seed=h + w)
    assert launches == 1
    rows = 8 if op == "conv2d" else 4
    assert f"({rows}x1 per thread)" in kernels
    assert f"{4 if dtype == 'f32' else 8}-element words" in kernels  # one tile across
    assert f"block tile {tile}x" in kernels
