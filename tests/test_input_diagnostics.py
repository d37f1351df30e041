"""Odd but possible input: a UTF-8 byte order mark, a stray `%`, function
names with control characters, `func.call`; each compiles or gives one clear
located error, and nothing reaches the terminal raw."""

from __future__ import annotations

from pathlib import Path

import pytest

import fusec
from fusec.analysis.diagnostics import FusecError
from fusec.compiler.cli import main

MODEL = """func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
"""


def write(tmp_path: Path, text: str, name: str = "m.mlir") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def test_a_byte_order_mark_is_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "\ufeff" + MODEL)
    assert main([str(path), "-o", str(tmp_path / "out")]) == 0
    assert fusec.compile("\ufeff" + MODEL, device="sim").launches == 1
    bad = write(tmp_path, "\ufeff" + MODEL.replace("nn.exp %x", "nn.exp %y"), "bad.mlir")
    assert main([str(bad)]) == 1
    assert capsys.readouterr().err.startswith(f"{bad}:2:15: error: ")  # columns as shown


def test_a_stray_sigil_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, MODEL.replace("nn.exp %x", "nn.exp % "))
    assert main([str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:2:15: error: Expected suffix identifier after '%'" in err
    assert "{first_char}" not in err


NASTY = 'a\\0Ab\\1B[31mc\\0D'  # a newline, an escape sequence, a carriage return


def test_control_characters_in_names_are_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    path = write(tmp_path, MODEL.replace("@f", f'@"{NASTY}"'))
    assert main(["run", str(path), "--function", "g", "--device", "sim"]) == 1
    err = capsys.readouterr().err
    assert "functions: @a\\nb\\x1b[31mc\\r)" in err
    assert "\x1b" not in err and "\r" not in err and err.count("\n") == 1
    assert main(["run", str(path), "--device", "sim"]) == 0
    out = capsys.readouterr().out
    assert "ran @a\\nb\\x1b[31mc\\r:" in out and "\x1b" not in out


def test_a_located_error_escapes_its_source_line() -> None:
    from fusec.analysis.diagnostics import escape_controls

    err = FusecError("bad\x1b[2J", context="line\rwith\x07bell\n^")
    assert err.render() == "error: bad\\x1b[2J\nline\\rwith\\x07bell\n^"
    assert escape_controls("plain ünïcode") == "plain ünïcode"
    assert escape_controls("rtl\u202eoverride") == "rtl\\u202eoverride"


CALL = """func.func @g(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.exp %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @g(%x) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
"""


@pytest.mark.parametrize("job", [["-o", "OUT"], ["run", "--device", "sim"]])
def test_func_call_is_a_located_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], job: list[str],
) -> None:
    path = write(tmp_path, CALL)
    argv = [str(path), "-o", str(tmp_path / "out")] if job[0] == "-o" else [
        "run", str(path), *job[1:]]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:6:3: error: func.call is not supported; inline the callee "
                          "@g into @f")
    assert "group-each-op" not in err
    assert not (tmp_path / "out").exists()
