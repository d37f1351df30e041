"""A backend added from outside in one place (docs/adding-a-backend.md): the
plugin `docs/examples/toy_backend.py` registers a one-thread-per-element
writer for pointwise groups and the pass that chooses it; through the real
`fusec` command its kernels are the ones in kernels.py and the compiled
program computes what the NumPy reference interpreter computes. A group whose
(backend, kind) no writer serves is a clear internal error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import fusec
from fusec.codegen import writers
from fusec.compiler.cli import main
from fusec.compiler.parsing import make_context, parse_module
from fusec.reference.interpreter import find_function, random_inputs, run_module

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "docs" / "examples" / "toy_backend.py"
USE_TOY = ["--load-pass-plugin", str(PLUGIN), "--insert-after",
           "tile-and-promote=use-toy-backend", "--target", "h200"]

# A broadcast add, a splat constant and tanh beside a reduction with its
# epilogue: a pointwise group (one per op without fusion) and a reduction group.
MODEL = """\
func.func @f(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %y: tensor<4x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x1xf32>) {
  %c = nn.constant dense<0.5> : tensor<4x8xf32>
  %0 = nn.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = nn.mul %0, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = nn.tanh %1 : tensor<4x8xf32>
  %3 = nn.reduce_max %y {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %4 = nn.sigmoid %3 : tensor<4x1xf32>
  func.return %2, %4 : tensor<4x8xf32>, tensor<4x1xf32>
}
"""


@pytest.fixture(autouse=True)
def _own_writers(monkeypatch: pytest.MonkeyPatch) -> None:
    # The plugin registers its writer when loaded; each test loads it into a
    # registry of its own, so no writer outlives the test.
    monkeypatch.setattr(writers, "_REGISTRY", writers.registered_writers())


def _kernels_by_kind(out: Path) -> dict[str, list[str]]:
    """The source of each launched kernel, by the kind its header names."""
    source = (out / "kernels.py").read_text()
    chunks = source.split("\n\n\n")
    plan = json.loads((out / "plan.json").read_text())
    found: dict[str, list[str]] = {}
    for launch in plan["functions"]["f"]["launches"]:
        text = next(c for c in chunks if f"\ndef {launch['kernel']}(" in c)
        kind = "toy" if "toy backend" in text else "numba"
        found.setdefault(kind, []).append(text)
    return found


@pytest.mark.parametrize("fusion", [[], ["--no-fusion"]], ids=["fused", "unfused"])
def test_the_toy_backend_writes_the_pointwise_groups(tmp_path: Path, fusion: list[str]) -> None:
    src, out = tmp_path / "m.mlir", tmp_path / "out"
    src.write_text(MODEL)
    assert main([str(src), *USE_TOY, *fusion, "-o", str(out)]) == 0
    kernels = _kernels_by_kind(out)
    assert kernels["toy"] and kernels["numba"], kernels  # the reduction stays fusec's
    for text in kernels["toy"]:
        assert "i = cuda.grid(1)" in text and "for " not in text  # one element a thread
    for text in kernels["numba"]:
        assert "(pointwise)" not in text
    module = parse_module(make_context(), MODEL, "m.mlir")
    inputs = random_inputs(find_function(module), seed=5)
    expected = run_module(module, inputs)
    got = fusec.load_out(out, device="sim")(*inputs)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_without_its_pass_the_toy_backend_writes_nothing(tmp_path: Path) -> None:
    src, out = tmp_path / "m.mlir", tmp_path / "out"
    src.write_text(MODEL)
    assert main([str(src), "--load-pass-plugin", str(PLUGIN), "--target", "h200",
                 "-o", str(out)]) == 0
    assert ("numba", "pointwise") in writers.registered_writers()
    assert ("toy", "pointwise") in writers.registered_writers()
    assert "toy" not in _kernels_by_kind(out)


GROUPED = """\
func.func @f(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %y = fusion.group (%x) {name = "g0", kind = "layout", backend = "BACKEND"}
      : (tensor<4x8xf32>) -> tensor<8x4xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %t = nn.transpose %a {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
    fusion.yield %t : tensor<8x4xf32>
  }
  func.return %y : tensor<8x4xf32>
}
"""


@pytest.mark.parametrize("backend", ["toy", "nosuch"])
def test_a_group_no_writer_serves_is_a_clear_internal_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str) -> None:
    src, out = tmp_path / "m.mlir", tmp_path / "out"
    src.write_text(GROUPED.replace("BACKEND", backend))
    # the toy backend has a pointwise writer only; "nosuch" has none at all
    assert main([str(src), "--load-pass-plugin", str(PLUGIN), "-p",
                 'tile-and-promote{target="h200"}', "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f'fusec: internal error: no writer for backend "{backend}" and kind '
                          '"layout" (group g0); registered: numba/pointwise, '), err
    assert "toy/pointwise" in err and "register_writer" in err and "Traceback" not in err
    assert not out.exists()
