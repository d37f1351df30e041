"""Target facts come from the target a compile asks for (analysis/targets.py):
compiling for a target with other facts changes what those facts decide."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

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
