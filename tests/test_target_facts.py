"""Target facts come from the target a compile asks for (analysis/targets.py):
compiling for a target with other facts changes what those facts decide."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest

from fusec.analysis.targets import H200, TARGETS
from fusec.compiler.cli import main

ROOT = Path(__file__).resolve().parent.parent


def _plan(out: Path) -> dict[str, object]:
    return json.loads((out / "plan.json").read_text())


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas (the CUDA toolkit)")
@pytest.mark.parametrize(("target", "arch"), [("h200", "sm_90"), ("a100", "sm_80"),
                                              ("orin", "sm_87")])
def test_ptx_info_assembles_for_the_compile_target(tmp_path: Path, target: str,
                                                   arch: str) -> None:
    out = tmp_path / "out"
    assert main([str(ROOT / "examples" / "softmax.mlir"), "-o", str(out), "--target", target,
                 "--register-source", "ptxas"]) == 0
    launches = _plan(out)["functions"]["softmax"]["launches"]  # type: ignore[index]
    assert launches and {la["register_source"] for la in launches} == {f"ptxas {arch}"}
    assert all(la["registers"] > 0 for la in launches)


# h200 with 1.5 KiB of static shared memory per block (dynamic as h200): what
# a kernel of static shared arrays may hold is the target's, not a constant.
SMALL_STATIC = dataclasses.replace(H200, name="small-static",
                                   description="h200 with 1.5 KiB of static shared memory",
                                   static_shared_memory_per_block=1536)

CONV = """
func.func @f(%x: tensor<1x16x10x9xf32>, %w: tensor<6x16x3x3xf32>) -> tensor<1x6x10x9xf32> {
  %y = nn.conv2d %x, %w {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], groups = 1}
      : (tensor<1x16x10x9xf32>, tensor<6x16x3x3xf32>) -> tensor<1x6x10x9xf32>
  func.return %y : tensor<1x6x10x9xf32>
}
"""


@pytest.fixture
def small_static(monkeypatch: pytest.MonkeyPatch) -> str:
    """`--target small-static`, registered for this test."""
    monkeypatch.setitem(TARGETS, SMALL_STATIC.name, SMALL_STATIC)
    return SMALL_STATIC.name


def _compile_and_check(tmp_path: Path, text: str, target: str) -> Path:
    """OUT of `text` compiled for `target`, run in the simulator on fresh
    random inputs and compared with the reference interpreter."""
    model = tmp_path / f"{target}.mlir"
    model.write_text(text)
    out = tmp_path / target
    assert main([str(model), "-o", str(out), "--target", target]) == 0
    assert main(["run", str(out), "--check", "--device", "sim"]) == 0
    return out


def _static_bytes(out: Path) -> int:
    found = re.findall(r"static shared memory: (\d+) bytes", (out / "kernels.py").read_text())
    assert len(found) == 1, found
    return int(found[0])


def test_a_window_tile_shrinks_to_the_targets_static_shared_memory(
        tmp_path: Path, small_static: str) -> None:
    wide = _static_bytes(_compile_and_check(tmp_path, CONV, "h200"))
    small = _static_bytes(_compile_and_check(tmp_path, CONV, small_static))
    assert small <= SMALL_STATIC.static_shared_memory_per_block < wide


def test_attention_tiles_past_the_targets_static_limit_are_dynamic(
        tmp_path: Path, small_static: str) -> None:
    text = (ROOT / "tests" / "fixtures" / "feature_interactions" /
            "rope_attention_causal.mlir").read_text()
    static = _compile_and_check(tmp_path, text, "h200")
    dynamic = _compile_and_check(tmp_path, text, small_static)
    assert "cuda.shared.array(0, " not in (static / "kernels.py").read_text()
    assert "cuda.shared.array(0, " in (dynamic / "kernels.py").read_text()
    shared = [la["shared_bytes"] for la in _plan(dynamic)["functions"]["f"]["launches"]]  # type: ignore[index]
    assert max(shared) > SMALL_STATIC.static_shared_memory_per_block

