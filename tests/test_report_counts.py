"""Counts in report.md and the CLI's summary lines agree with their nouns:
`(1 launch)`, `(2 launches)`, `1 kernel launch`, `1 element differs`."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest

from fusec.analysis.diagnostics import counted
from fusec.compiler import run_command
from fusec.compiler.autotune import TuningResult
from fusec.compiler.cli import main
from fusec.compiler.compile import compile_model

ONE_KERNEL = """
func.func @f(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = nn.add %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = nn.relu %a : tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
"""
# A reduction of a reduction's result: two kernels.
TWO_KERNELS = """
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %m = nn.reduce_max %x {axes = [1], keepdims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
  %s = nn.sub %x, %m : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %t = nn.transpose %s {perm = [1, 0]} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %u = nn.reduce_sum %t {axes = [1], keepdims = true} : (tensor<8x4xf32>) -> tensor<8x1xf32>
  %b = nn.reshape %u : (tensor<8x1xf32>) -> tensor<1x8xf32>
  %r = nn.add %x, %b : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}
"""


def test_counted() -> None:
    assert counted(1, "launch", "launches") == "1 launch"
    assert counted(0, "launch", "launches") == "0 launches"
    assert counted(2, "kernel") == "2 kernels"


@pytest.mark.parametrize(("source", "total"), [(ONE_KERNEL, "(1 launch)"),
                                                (TWO_KERNELS, "({n} launches)")],
                         ids=["one", "two"])
def test_report_total_row(tmp_path: Path, source: str, total: str) -> None:
    path = tmp_path / "m.mlir"
    path.write_text(source)
    art = compile_model(path)
    n = len(art.program.functions["f"].launches)
    assert (n == 1) == (source == ONE_KERNEL), art.program.kernels_source
    assert f"| | **total** {total.format(n=n)} |" in art.report_md


def test_run_summary_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.mlir"
    path.write_text(ONE_KERNEL)
    assert main(["run", str(path), "--device", "sim"]) == 0
    assert "ran @f: 1 kernel launch on " in capsys.readouterr().out


def test_compare_counts_elements() -> None:
    ints = np.array([1, 2, 3])
    assert run_command.compare(ints, ints)[1] == "0 elements differ (exact match required) ok"
    assert run_command.compare(np.array([1, 2, 4]), ints)[1].startswith("1 element differs ")
    ref = np.array([1.0, np.inf])
    assert ", 1 NaN/inf element differs FAIL" in run_command.compare(np.array([1.0, 0.0]), ref)[1]


def test_tuning_summary() -> None:
    group = cast(Any, SimpleNamespace(from_cache=True))
    summary = TuningResult("dev", [group]).summary()
    assert summary.startswith("1 group from the tuning cache, 0 timed; "), summary
    assert summary.endswith("; 0 timings on the device"), summary
