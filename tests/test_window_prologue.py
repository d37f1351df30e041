"""An elementwise prologue fused into a window group (scheduling/window_prologue.py):
a pointwise op computing a depthwise conv's or pool's input, strided,
dilated, 1-D or 2-D, is evaluated where the tiled kernel stages its halo
tile, so the program is one kernel; through `fusec` (compile, then
`run --check` against the reference interpreter on fresh random inputs),
odd and prime extents, f32 and bf16. And the refusals: a prologue value
also read elsewhere, a prologue feeding a conv + pool kernel, and the cost
check on halo recomputation."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fusec.compiler.cli import main


def _compile_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                       text: str) -> tuple[int, str]:
    """(kernel launches, remarks) of `text` compiled by `fusec`, after
    `fusec run --check` compared it with the reference interpreter."""
    model, out = tmp_path / "model.mlir", tmp_path / "out"
    model.write_text(text)
    assert main([str(model), "-o", str(out), "--remarks"]) == 0
    remarks = capsys.readouterr().err
    assert main(["run", str(out), "--check", "--device", "sim"]) == 0
    captured = capsys.readouterr()
    said = captured.out + captured.err
    assert "Traceback" not in said and "check passed" in said, said
    plan = json.loads((out / "plan.json").read_text())
    launches = plan["functions"]["f"]["launches"]
    return len(launches), remarks


def _conv(dtype: str, x: tuple[int, int, int, int], k: tuple[int, int], strides: list[int],
          dilations: list[int], pads: list[int], prologue: str) -> str:
    n, c, h, w = x
    kh, kw = k
    oh = (h + pads[0] + pads[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (w + pads[1] + pads[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    t = f"tensor<{n}x{c}x{h}x{w}x{dtype}>"
    return f"""
func.func @f(%x: {t}, %w: tensor<{c}x1x{kh}x{kw}x{dtype}>, %b: tensor<{n}x1x1x1x{dtype}>)
    -> tensor<{n}x{c}x{oh}x{ow}x{dtype}> {{
  {prologue.format(t=t, dtype=dtype, n=n)}
  %y = nn.conv2d %p, %w {{strides = {strides}, pads = {pads}, dilations = {dilations},
      groups = {c}}} : ({t}, tensor<{c}x1x{kh}x{kw}x{dtype}>) -> tensor<{n}x{c}x{oh}x{ow}x{dtype}>
  func.return %y : tensor<{n}x{c}x{oh}x{ow}x{dtype}>
}}
"""


SILU = "%p = nn.silu %x : {t}"
BIAS = ("%p = nn.add %x, %b : ({t}, tensor<{n}x1x1x1x{dtype}>) -> {t}")


@pytest.mark.parametrize(("dtype", "x", "k", "strides", "dilations", "pads", "prologue"), [
    ("f32", (2, 3, 13, 11), (3, 3), [2, 2], [1, 1], [1, 1, 1, 1], SILU),
    ("bf16", (1, 5, 11, 13), (5, 5), [3, 3], [1, 1], [2, 2, 2, 2], BIAS),
    ("f32", (2, 3, 13, 9), (3, 3), [1, 1], [2, 2], [2, 2, 2, 2], BIAS),
    ("bf16", (1, 3, 9, 11), (3, 3), [1, 1], [3, 3], [3, 3, 3, 3], SILU),
    ("f32", (2, 3, 7, 17), (1, 3), [1, 2], [1, 1], [0, 1, 0, 1], SILU),
    ("bf16", (1, 5, 3, 19), (1, 3), [1, 3], [1, 2], [0, 2, 0, 2], BIAS),
])
def test_a_pointwise_prologue_joins_a_depthwise_conv(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], dtype: str,
        x: tuple[int, int, int, int], k: tuple[int, int], strides: list[int],
        dilations: list[int], pads: list[int], prologue: str) -> None:
    text = _conv(dtype, x, k, strides, dilations, pads, prologue)
    launches, remarks = _compile_and_check(tmp_path, capsys, text)
    assert launches == 1, remarks
    assert "would be a prologue" not in remarks


@pytest.mark.parametrize(("pool", "dtype", "attrs", "x", "out"), [
    ("max_pool2d", "f32", "kernel = [2, 2], strides = [2, 2], pads = [0, 0, 0, 0]",
     (2, 3, 11, 13), (5, 6)),
    ("avg_pool2d", "bf16", "kernel = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]",
     (1, 3, 13, 7), (7, 4)),
    ("avg_pool2d", "f32", "kernel = [1, 3], strides = [1, 3], pads = [0, 1, 0, 1]",
     (2, 3, 5, 17), (5, 6)),
])
def test_a_pointwise_prologue_joins_a_pool(
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
  %r = nn.relu %y : {o}
  func.return %r : {o}
}}
"""
    launches, remarks = _compile_and_check(tmp_path, capsys, text)
    assert launches == 1, remarks


def test_a_prologue_value_read_elsewhere_stays_its_own_kernel(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t, o = "tensor<1x3x9x7xf32>", "tensor<1x3x5x4xf32>"
    text = f"""
func.func @f(%x: {t}) -> ({o}, {t}) {{
  %p = nn.silu %x : {t}
  %y = nn.max_pool2d %p {{kernel = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]}}
      : ({t}) -> {o}
  func.return %y, %p : {o}, {t}
}}
"""
    launches, remarks = _compile_and_check(tmp_path, capsys, text)
    assert launches == 2, remarks
    assert "a window kernel evaluates its prologue only where it stages" in remarks


def test_a_conv_with_a_prologue_is_not_fused_with_its_pool(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = "tensor<1x3x10x10xf32>"
    text = f"""
func.func @f(%x: {t}, %w: tensor<3x1x3x3xf32>) -> tensor<1x3x5x5xf32> {{
  %p = nn.relu %x : {t}
  %c = nn.conv2d %p, %w {{pads = [1, 1, 1, 1], groups = 3}}
      : ({t}, tensor<3x1x3x3xf32>) -> {t}
  %y = nn.max_pool2d %c {{kernel = [2, 2], strides = [2, 2]}}
      : ({t}) -> tensor<1x3x5x5xf32>
  func.return %y : tensor<1x3x5x5xf32>
}}
"""
    launches, remarks = _compile_and_check(tmp_path, capsys, text)
    # the relu joins the conv (its input's write and read saved); the pool
    # then reads the conv's result
    assert launches == 2, remarks
    assert "fused nn.relu (%p) into group g0" in remarks
    assert "a conv + pool kernel reads its input directly" in remarks


def test_the_cost_check_refuses_a_prologue_recomputed_on_halos(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "model.mlir"
    model.write_text(_conv("f32", (1, 3, 13, 11), (3, 3), [1, 1], [3, 3], [3, 3, 3, 3], SILU))
    pipeline = "decompose,form-fusion-groups{max-recompute-flops=0}"
    assert main([str(model), "-p", pipeline, "--remarks"]) == 0
    err = capsys.readouterr().err
    assert "would be recomputed on overlapping halo tiles" in err, err
    assert "over max_recompute_flops = 0" in err


@pytest.mark.parametrize(("dtype", "x", "k", "strides", "pads", "scalar"), [
    # one tile across (staged as one flat run of words), a constant
    ("bf16", (2, 3, 13, 11), (1, 3), [1, 2], [0, 1, 0, 1], "constant"),
    # several tiles across (staged row by row), an argument of one element
    ("f32", (1, 2, 9, 150), (3, 3), [1, 1], [1, 1, 1, 1], "argument"),
])
def test_a_scalar_of_the_prologue_is_read_once_per_thread(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], dtype: str,
        x: tuple[int, int, int, int], k: tuple[int, int], strides: list[int],
        pads: list[int], scalar: str) -> None:
    """A one-element input the prologue adds to every staged element is
    loaded once, at the kernel's start (it was loaded per element), and the
    numbers still match the reference."""
    if scalar == "constant":
        prologue = ("%s = nn.constant dense<0.5> : tensor<{dtype}>\n"
                    "  %p = nn.add %x, %s : ({t}, tensor<{dtype}>) -> {t}")
        text = _conv(dtype, x, k, strides, [1, 1], pads, prologue)
    else:
        prologue = "%p = nn.mul %x, %s : ({t}, tensor<1x{dtype}>) -> {t}"
        text = _conv(dtype, x, k, strides, [1, 1], pads, prologue)
        text = text.replace("%b: tensor", f"%s: tensor<1x{dtype}>, %b: tensor")
    launches, remarks = _compile_and_check(tmp_path, capsys, text)
    assert launches == 1, remarks
    kernels = (tmp_path / "out" / "kernels.py").read_text()
    held = re.findall(r"held\d+ = .*\bin(\d+)\[0\]", kernels)
    assert len(held) == 1, kernels
    assert kernels.count(f"in{held[0]}[") == 1, kernels
