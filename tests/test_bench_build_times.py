"""`python -m fusec.bench.build_times OUT`: one row per distinct kernel of an
OUT (kernels that differ only in their names are built once), with the
seconds of numba's front end, NVVM and ptxas and the PTX's facts; built
without a GPU, as the build workers build. Checked for what it counts, never
for how long anything took."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fusec.bench.build_times import main
from fusec.compiler.cli import main as fusec

# Two identical layers (one kernel body, two launches) and an exp.
MODEL = """
func.func @f(%x: tensor<4x64xf32>, %y: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %a = nn.add %x, %y : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %b = nn.exp %a : tensor<4x64xf32>
  %c = nn.add %b, %y : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  func.return %c : tensor<4x64xf32>
}
"""


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")
def test_one_row_per_distinct_kernel(tmp_path: Path, no_ptxas_probe: None,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "model.mlir"
    model.write_text(MODEL)
    out = tmp_path / "out"
    assert fusec([str(model), "-o", str(out), "--no-fusion", "--target", "h200"]) == 0
    capsys.readouterr()
    assert main([str(out)]) == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines()[2:]]
    by_kernels = sorted((int(r[1]), r[0].strip()) for r in rows)
    assert [n for n, _ in by_kernels] == [1, 2]  # the exp; the two adds, built once
    for row in rows:
        front, nvvm, ptxas = (float(v) for v in row[2:5])
        assert front > 0 and nvvm > 0 and ptxas > 0
        assert int(row[6]) == 0 and int(row[7]) == 0  # no mma.sync, no local memory
        assert int(row[8]) > 0 and int(row[9]) == 0  # registers, no spills


def test_a_folder_that_is_not_an_out_is_an_error(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path)]) != 0
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
