"""`fusec MODEL.mlir -o OUT`: the OUT contract, plan.json's schema, and
writing OUT whole or not at all."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from fusec.compiler import compile as compile_job
from fusec.compiler.cli import main
from fusec.compiler.out_marker import MARKER
from fusec.compiler.parsing import make_context, parse_module
from fusec.runtime.plan_loading import program_from_plan

MODEL = """
func.func @f(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<32xf32> {
  %c = nn.constant dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]> : tensor<8xf32>
  %0 = nn.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = nn.mul %0, %c : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %2 = nn.exp %1 : tensor<4x8xf32>
  %3 = nn.reshape %2 : (tensor<4x8xf32>) -> tensor<32xf32>
  func.return %3 : tensor<32xf32>
}
"""

LAUNCH_KEYS = {"kernel", "grid", "block", "shared_bytes", "est_registers", "ops"}


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.mlir"
    path.write_text(MODEL)
    return path


def compile_to(model: Path, out: Path, *flags: str) -> int:
    return main([str(model), "-o", str(out), *flags])


def test_out_holds_the_contract_files(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert compile_to(model, out) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(compile_job.OUT_FILES)
    parse_module(make_context(), (out / "model.mlir").read_text(), "model.mlir")
    kernels = (out / "kernels.py").read_text()
    defined = {n.name for n in ast.parse(kernels).body if isinstance(n, ast.FunctionDef)}
    plan = json.loads((out / "plan.json").read_text())
    f = plan["functions"]["f"]
    assert [i["name"] for i in f["inputs"]] == ["x", "b"]
    assert [o["name"] for o in f["outputs"]] == ["output_0"]
    assert f["launches"], "at least one kernel"
    for launch in f["launches"]:
        assert set(launch) >= LAUNCH_KEYS
        assert launch["kernel"] in defined
        assert len(launch["grid"]) == len(launch["block"]) == 3
        assert all(op.startswith("nn.") for op in launch["ops"])
    with np.load(out / "constants.npz") as npz:
        assert sorted(npz.files) == sorted(f["constants"].values())
        np.testing.assert_array_equal(npz[next(iter(f["constants"].values()))],
                                      np.arange(1, 9, dtype=np.float32))
    report = (out / "report.md").read_text()
    for heading in ("## Summary", "## @f", "## Fusion decisions", "## Refused fusions"):
        assert heading in report


def test_no_fusion_gives_one_kernel_per_op(model: Path, tmp_path: Path) -> None:
    assert compile_to(model, tmp_path / "out", "--no-fusion") == 0
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert plan["fusion"] is False
    assert [la["ops"] for la in plan["functions"]["f"]["launches"]] == [
        ["nn.add"], ["nn.mul"], ["nn.exp"]]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Fusion off (`--no-fusion`)" in report
    assert "| @f | 3 | 3 |" in report


def test_a_failed_compile_leaves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text(MODEL.replace("nn.exp %1", "nn.exp %9"))
    assert compile_to(bad, tmp_path / "out") == 1
    assert "error" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.mlir"]


def test_an_existing_out_is_replaced_only_on_success(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert compile_to(model, out) == 0
    (out / "report.md").write_text("old")
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f(")
    assert compile_to(bad, out) == 1
    assert (out / "report.md").read_text() == "old"  # the old OUT is untouched
    assert compile_to(model, out) == 0
    assert (out / "report.md").read_text() != "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.mlir", "model.mlir", "out"]


def test_a_failed_write_leaves_no_temporary_directory(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(compile_job.np, "savez", broken)
    assert compile_to(model, tmp_path / "out") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.mlir"]


def test_a_foreign_directory_is_never_replaced(model: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("...")
    assert compile_to(model, precious) == 1
    assert "is not a fusec output directory" in capsys.readouterr().err
    assert (precious / "thesis.tex").exists()


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_a_directory_with_a_plan_json_is_not_replaced(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 10 item 3: a plan.json alone used to pass for a fusec output.
    precious = tmp_path / "precious"
    (precious / "src").mkdir(parents=True)
    (precious / "plan.json").write_text('{"mine": true}')
    (precious / "src" / "main.c").write_text("int main(void) { return 0; }")
    (precious / "thesis.tex").write_text("\\documentclass{article}")
    before = _tree(precious)
    assert compile_to(model, precious) == 1
    err = capsys.readouterr().err
    assert "error: " in err and "is not a fusec output directory" in err
    assert f"no valid {MARKER}" in err
    assert _tree(precious) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.mlir", "precious"]


@pytest.mark.parametrize("extra", ["notes.txt", "sub/deep.txt"])
def test_an_out_with_files_fusec_did_not_write_is_not_replaced(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str
) -> None:
    out = tmp_path / "out"
    assert compile_to(model, out) == 0
    (out / extra).parent.mkdir(exist_ok=True)
    (out / extra).write_text("mine")
    before = _tree(out)
    assert compile_to(model, out) == 1
    assert f"holds files fusec did not write ({extra.split('/')[0]})" in capsys.readouterr().err
    assert _tree(out) == before


def test_a_folder_under_a_manifest_name_is_not_replaced(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert compile_to(model, out) == 0
    (out / "report.md").unlink()
    (out / "report.md").mkdir()
    (out / "report.md" / "draft.txt").write_text("mine")
    assert compile_to(model, out) == 1
    assert "holds files fusec did not write (report.md)" in capsys.readouterr().err
    assert (out / "report.md" / "draft.txt").read_text() == "mine"


@pytest.mark.parametrize("marker", [
    "", "{", '{"format": "fusec-out", "version": 99, "files": []}',
    '{"format": "fusec-out", "version": 1, "files": ["../x"]}', "[]",
])
def test_an_invalid_marker_is_refused(model: Path, tmp_path: Path, marker: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert compile_to(model, out) == 0
    (out / MARKER).write_text(marker)
    before = _tree(out)
    assert compile_to(model, out) == 1
    assert "is not a fusec output directory" in capsys.readouterr().err
    assert _tree(out) == before


def test_the_marker_lists_what_fusec_wrote(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert compile_to(model, out) == 0
    marker = json.loads((out / MARKER).read_text())
    assert marker["format"] == "fusec-out" and marker["version"] == 1
    assert sorted(marker["files"]) == sorted(n for n in compile_job.OUT_FILES if n != MARKER)
    assert compile_to(model, out) == 0  # its own output is replaced
    empty = tmp_path / "empty"
    empty.mkdir()
    assert compile_to(model, empty) == 0  # an empty directory holds nothing to lose


def test_mlir_output_and_no_output_still_print_ir(model: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(model), "-o", str(tmp_path / "final.mlir")]) == 0
    assert "func.func @f" in (tmp_path / "final.mlir").read_text()
    assert main([str(model)]) == 0
    assert "func.func @f" in capsys.readouterr().out


def test_plan_round_trips(model: Path) -> None:
    artifacts = compile_job.compile_model(model)
    program, memory = program_from_plan(
        json.loads(json.dumps(artifacts.plan)), artifacts.kernels_py, artifacts.constants)
    assert program.functions["f"].launches == artifacts.program.functions["f"].launches
    assert program.functions["f"].views == artifacts.program.functions["f"].views
    assert memory == artifacts.memory


def test_unknown_target_is_an_error(model: Path, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert compile_to(model, tmp_path / "out", "--target", "tpu9") == 1
    assert "unknown target 'tpu9'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
