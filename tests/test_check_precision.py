"""check-precision: a fused group whose result drifts from the unfused
program's beyond its dtype's tolerance is split, compiles to more launches,
and the split program computes what the unfused program does."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from fusec.analysis.remarks import collect_remarks
from fusec.compiler.cli import main as fusec_main
from fusec.compiler.compile import compile_model
from fusec.compiler.parsing import make_context, parse_module
from fusec.passes.check_precision import relative_error, sci
from fusec.reference.interpreter import find_function, random_inputs, run_block
from fusec.runtime.executor import run_program

T = "tensor<4x8xf16>"
CANCEL = f"""func.func @cancel(%x: {T}) -> {T} {{
  %c = nn.constant dense<1024.0> : tensor<f16>
  %a = nn.add %x, %c : ({T}, tensor<f16>) -> {T}
  %s = nn.sub %a, %c : ({T}, tensor<f16>) -> {T}
  %e = nn.exp %s : {T}
  func.return %e : {T}
}}"""
F16_TOLERANCE = 1e-2


def unfused_reference(text: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The program with every value stored in its own type (one kernel per op)."""
    func = find_function(parse_module(make_context(), text, "m.mlir"))
    return run_block(func.body.block, inputs, np.float32, round_stored=True)


def test_refused_group_compiles_to_more_launches_and_matches_the_reference() -> None:
    fused = compile_model(CANCEL, target="h200")
    checked = compile_model(CANCEL, target="h200", check_precision=True)
    assert len(fused.program.functions["cancel"].launches) == 1
    assert len(checked.program.functions["cancel"].launches) == 3
    remarks = collect_remarks(checked.module)
    assert any(r.startswith("missed: group g0 refused: fused result differs") for r in remarks)
    assert "group g0 refused" in checked.report_md
    func = find_function(parse_module(make_context(), CANCEL, "m.mlir"))
    inputs = random_inputs(func, seed=5)
    (want,) = unfused_reference(CANCEL, inputs)
    (got,) = run_program(checked.program, "cancel", inputs)
    assert got.dtype == np.float16
    assert relative_error(want, got.astype(np.float32)) <= F16_TOLERANCE
    (drifted,) = run_program(fused.program, "cancel", inputs)
    assert relative_error(want, drifted.astype(np.float32)) > F16_TOLERANCE


def test_cli_flag_runs_the_pass(tmp_path: Path) -> None:
    model = tmp_path / "m.mlir"
    model.write_text(CANCEL)
    assert fusec_main([str(model), "-o", str(tmp_path / "out"), "--check-precision"]) == 0
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert "check-precision" in plan["passes"]
    assert len(plan["functions"]["cancel"]["launches"]) == 3


def test_sci_drops_exponent_padding() -> None:
    assert sci(0.031) == "3.1e-2"
    assert sci(1e-2, 0) == "1e-2"
    assert sci(5e-12, 0) == "5e-12"
