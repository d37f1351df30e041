"""Fusion remarks stay out of printed and written IR (`fusec MODEL`, `-p ...`,
`--print-ir-after`, OUT/model.mlir) unless `--remarks-in-ir` asks for them;
`--remarks` (stderr) and report.md keep listing them."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusec.compiler.cli import main

SOFTMAX = str(Path(__file__).resolve().parent.parent / "examples" / "softmax.mlir")
FUSED = "remark: fused nn.exp (%2) into group g0"


def fusec(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[str, str]:
    """(stdout, stderr) of `fusec ARGS`, which must succeed."""
    assert main(list(args)) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


@pytest.mark.parametrize("pipeline", [[], ["-p", "decompose,form-fusion-groups"]],
                         ids=["default", "p"])
def test_printed_ir_has_no_remarks(capsys: pytest.CaptureFixture[str],
                                   pipeline: list[str]) -> None:
    out, err = fusec(capsys, SOFTMAX, *pipeline)
    assert out.startswith("builtin.module {\n"), out[:200]
    assert "fusion.remarks" not in out and "remark:" not in out
    assert "fusion.group" in out
    assert err == ""


def test_ir_dumps_have_no_remarks(capsys: pytest.CaptureFixture[str]) -> None:
    _, err = fusec(capsys, SOFTMAX, "-p", "decompose,form-fusion-groups,group-each-op",
                   "--print-ir-after=form-fusion-groups")
    assert "IR Dump After form-fusion-groups" in err
    assert "fusion.remarks" not in err


def test_remarks_flag_and_report_keep_them(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    _, err = fusec(capsys, SOFTMAX, "-o", str(out_dir), "--remarks")
    assert FUSED in err
    assert "fusion.remarks" not in (out_dir / "model.mlir").read_text()
    assert f"- {FUSED}" in (out_dir / "report.md").read_text()


def test_remarks_in_ir_keeps_the_attribute(capsys: pytest.CaptureFixture[str],
                                           tmp_path: Path) -> None:
    out, _ = fusec(capsys, SOFTMAX, "--remarks-in-ir")
    assert out.startswith('builtin.module attributes {fusion.remarks = ["remark: fused')
    assert FUSED in out
    out_dir = tmp_path / "out"
    fusec(capsys, SOFTMAX, "-o", str(out_dir), "--remarks-in-ir")
    assert FUSED in (out_dir / "model.mlir").read_text()
    # The written IR with its remarks parses again.
    again, _ = fusec(capsys, str(out_dir / "model.mlir"), "-p", "dce", "--remarks-in-ir")
    assert FUSED in again
