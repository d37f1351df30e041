"""What a new user meets first: `fusec --help` names every command, flags are
taken only whole (no argparse abbreviations), and a misspelt flag, pass name
or pass option gets a "did you mean". Run through the `fusec` console script."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fusec.command import COMMANDS
from fusec.compiler import run_command
from fusec.compiler.cli import build_parser
from fusec.importers.onnx import cli as import_cli

SOFTMAX = str(Path(__file__).resolve().parent.parent / "examples" / "softmax.mlir")


def fusec(*args: str) -> subprocess.CompletedProcess[str]:
    """`fusec ARGS` through the installed console script."""
    script = Path(sys.executable).parent / "fusec"
    cmd = [str(script)] if script.exists() else [shutil.which("fusec") or "fusec"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, check=False,
                          timeout=120)


def test_help_lists_every_command_with_one_line() -> None:
    done = fusec("--help")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("usage: fusec MODEL")
    assert list(COMMANDS) == ["run", "import"]
    for name, command in COMMANDS.items():
        assert any(line.split() == ["fusec", name, *command.summary.split()]
                   for line in lines), name
        assert f"       fusec {name} {command.usage}" in lines, name
    assert "'fusec run --help' and 'fusec import --help' show their options." in lines


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_command_has_its_own_help(command: str) -> None:
    done = fusec(command, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: fusec {command} ")


def test_python_dash_m_fusec_is_the_fusec_command(tmp_path: Path) -> None:
    def module(name: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", name, *args], capture_output=True,
                              text=True, check=False, timeout=120)

    assert module("fusec", "--help").stdout == fusec("--help").stdout
    done = module("fusec", "import", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: fusec import ")
    # the driver alone runs its own commands, and its help lists only those
    out = tmp_path / "out"
    assert module("fusec.compiler.cli", SOFTMAX, "-o", str(out)).returncode == 0
    done = module("fusec.compiler.cli", "run", str(out))
    assert done.returncode == 0, done.stderr
    help_text = module("fusec.compiler.cli", "--help").stdout
    assert "fusec run " in help_text and "fusec import" not in help_text


@pytest.mark.parametrize("parser", [build_parser(), run_command.build_parser(),
                                    import_cli.build_parser()], ids=["fusec", "run", "import"])
def test_no_parser_takes_abbreviations(parser: argparse.ArgumentParser) -> None:
    assert parser.allow_abbrev is False


@pytest.mark.parametrize(("args", "message"), [
    (["--remark", SOFTMAX],
     "fusec: error: unrecognized arguments: --remark; did you mean '--remarks'?"),
    (["--remakrs", SOFTMAX],
     "fusec: error: unrecognized arguments: --remakrs; did you mean '--remarks'?"),
    (["run", SOFTMAX, "--chek"],
     "fusec run: error: unrecognized arguments: --chek; did you mean '--check'?"),
    (["run", SOFTMAX, "--che"],
     "fusec run: error: unrecognized arguments: --che; did you mean '--check'?"),
    (["import", "m.onnx", "--params-abov=4"],
     "fusec import: error: unrecognized arguments: --params-abov=4; "
     "did you mean '--params-above'?"),
    (["--remakrs", "--quite", SOFTMAX],
     "fusec: error: unrecognized arguments: --remakrs --quite; did you mean '--remarks' for "
     "'--remakrs', '--quiet' for '--quite'?"),
    (["--frobnicate", SOFTMAX], "fusec: error: unrecognized arguments: --frobnicate"),
], ids=["prefix", "typo", "run-typo", "run-prefix", "import-typo", "two", "no-match"])
def test_flags_are_whole_and_misspellings_get_a_suggestion(args: list[str],
                                                           message: str) -> None:
    done = fusec(*args)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.rstrip("\n").split("\n")[-1] == message
    assert done.stderr.startswith("usage: fusec")


@pytest.mark.parametrize(("args", "message"), [
    (["-p", "decompse"], "error: unknown pass 'decompse'; did you mean 'decompose'?"),
    (["--print-ir-after=decompse"],
     "error: --print-ir-after=decompse: the pipeline has no pass 'decompse'; did you mean "
     "'decompose'? (it runs "),
    (["--insert-after", "form-fusion-group=cse"],
     "error: --insert-after form-fusion-group=cse: the pipeline has no pass "
     "'form-fusion-group'; did you mean 'form-fusion-groups'? (it runs "),
    (["-p", "decompose,form-fusion-groups{polcy=greedy}"],
     "error: pass 'form-fusion-groups' has no option 'polcy'; did you mean 'policy'? "
     "(its options: "),
], ids=["pass", "print-ir-after", "insert-after", "option"])
def test_misspelt_pass_names_get_a_suggestion(args: list[str], message: str) -> None:
    done = fusec(SOFTMAX, *args)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith(message), done.stderr
