"""`python -m fusec.bench.build_times OUT`: one row per distinct kernel of an
OUT (kernels that differ only in their names are built once), with the
seconds of numba's front end, NVVM and ptxas and the PTX's facts; built
without a GPU, as the build workers build. Checked for what it counts, never
for how long anything took."""

from __future__ import annotations

import json
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


@pytest.mark.slow  # builds kernels with numba and ptxas twice
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")
def test_a_cubin_digest_does_not_depend_on_what_was_built_before(
        tmp_path: Path, no_ptxas_probe: None) -> None:
    """numba numbers functions and shared arrays per process: the digest of
    a kernel built after others is the digest of it built alone."""
    model = tmp_path / "model.mlir"
    model.write_text(MODEL)
    out = tmp_path / "out"
    assert fusec([str(model), "-o", str(out), "--no-fusion", "--target", "h200"]) == 0
    assert main([str(out), "--json", str(tmp_path / "all.json")]) == 0
    rows = json.loads((tmp_path / "all.json").read_text())
    assert len({r["cubin_sha256"] for r in rows}) == 2 and all(r["cpu_s"] > 0 for r in rows)
    last = sorted(rows, key=lambda r: r["label"])[-1]
    assert main([str(out), "--only", last["label"], "--json", str(tmp_path / "one.json")]) == 0
    (alone,) = json.loads((tmp_path / "one.json").read_text())
    assert alone["cubin_sha256"] == last["cubin_sha256"]


def test_a_folder_that_is_not_an_out_is_an_error(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path)]) != 0
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
