"""The benchmarks' copy floor (bench/torch_peer.py `floor_work`): an input
read only through `nn.slice`s counts the regions they cut, not the whole
tensor (a crop was once measured at 119% of a floor that counted the bytes
it never reads)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fusec.compiler.parsing import make_context, parse_module
from fusec.reference.interpreter import find_function

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from torch_peer import floor_work  # noqa: E402

from fusec.fuzz.movement_floor import sliced_elements  # noqa: E402

CROP = """
func.func @f(%a: tensor<5x13x5xf32>) -> tensor<4x10x4xf32> {
  %s = nn.slice %a {starts = [1, 2, 0], limits = [5, 12, 4]}
      : (tensor<5x13x5xf32>) -> tensor<4x10x4xf32>
  %r = nn.relu %s : tensor<4x10x4xf32>
  func.return %r : tensor<4x10x4xf32>
}
"""
# Both halves of a deinterleave: stride 2 along the innermost axis, after a scale.
HALVES = """
func.func @f(%a: tensor<4x13xf32>) -> tensor<4x6xf32> {
  %c = nn.constant dense<1.25> : tensor<f32>
  %m = nn.mul %a, %c : (tensor<4x13xf32>, tensor<f32>) -> tensor<4x13xf32>
  %e = nn.slice %m {starts = [0, 0], limits = [4, 12], strides = [1, 2]}
      : (tensor<4x13xf32>) -> tensor<4x6xf32>
  %o = nn.slice %m {starts = [0, 1], limits = [4, 12], strides = [1, 2]}
      : (tensor<4x13xf32>) -> tensor<4x6xf32>
  %s = nn.add %e, %o : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  func.return %s : tensor<4x6xf32>
}
"""
# Every other row: strided along an outer axis only.
ROWS = """
func.func @f(%a: tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<8x16xf32>) {
  %s = nn.slice %a {starts = [0, 0], limits = [8, 16], strides = [2, 1]}
      : (tensor<8x16xf32>) -> tensor<4x16xf32>
  %t = nn.tanh %a : tensor<8x16xf32>
  func.return %s, %t : tensor<4x16xf32>, tensor<8x16xf32>
}
"""


def _arg(text: str) -> object:
    func = find_function(parse_module(make_context(), text, "m.mlir"), None)
    return func, func.body.block.args[0]


def test_a_crop_counts_the_region_it_cuts() -> None:
    func, arg = _arg(CROP)
    assert sliced_elements(arg) == 4 * 10 * 4
    moved, _ = floor_work(func, [torch.zeros(5, 13, 5)], [torch.zeros(4, 10, 4)])
    assert moved == (160 + 160) * 4


def test_strided_innermost_slices_count_their_span_and_never_past_the_tensor() -> None:
    _, arg = _arg(HALVES)
    assert sliced_elements(arg) == 4 * 13  # two spans of 4x12 each, capped at the tensor


def test_an_input_also_read_whole_counts_whole() -> None:
    _, arg = _arg(ROWS)
    assert sliced_elements(arg) is None
