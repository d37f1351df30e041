"""Inputs at or past fusec's limits: each is a clear error before anything is
written (an option's `fusec: error:` line, or a located `file:line:col: error:`),
never an internal error or a program that compiles and then cannot run."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusec.compiler.cli import main

VALID = """\
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
"""


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """`fusec ARGS` in-process: exit code (argparse's SystemExit too) and stderr."""
    try:
        code = main(list(args))
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    return code, err


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "m.mlir"
    path.write_text(VALID)
    return path


@pytest.mark.parametrize(("args", "prefix", "option"), [
    (["--max-registers", "-5"], "fusec", "--max-registers"),
    (["--shared-memory-limit", "-1"], "fusec", "--shared-memory-limit"),
    (["--max-registers", "many"], "fusec", "--max-registers"),
])
def test_negative_compile_options(capsys: pytest.CaptureFixture[str], model: Path,
                                  tmp_path: Path, args: list[str], prefix: str,
                                  option: str) -> None:
    code, err = run_main(capsys, str(model), "-o", str(tmp_path / "out"), *args)
    assert code == 1
    assert f"{prefix}: error: argument {option}: " in err
    assert not (tmp_path / "out").exists()


def test_negative_seed(capsys: pytest.CaptureFixture[str], model: Path) -> None:
    code, err = run_main(capsys, "run", str(model), "--seed", "-3")
    assert code == 1
    assert "fusec run: error: argument --seed: must be a non-negative integer, not -3" in err


def test_negative_params_above(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, err = run_main(capsys, "import", str(tmp_path / "m.onnx"), "-o",
                         str(tmp_path / "m.mlir"), "--params-above", "-1")
    assert code == 1
    assert "fusec import: error: argument --params-above: must be a non-negative" in err


@pytest.mark.parametrize("suffix", ["", ".mlir", ".dot"])
def test_output_name_too_long(capsys: pytest.CaptureFixture[str], model: Path,
                              tmp_path: Path, suffix: str) -> None:
    """A name the file system refuses is the user's error, naming the path."""
    name = tmp_path / ("a" * 300 + suffix)
    extra = ["--emit", "dot"] if suffix == ".dot" else []
    code, err = run_main(capsys, str(model), "-o", str(name), *extra)
    assert code == 1
    assert err.startswith(f"fusec: error: cannot use '{name}': "), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.mlir"]
