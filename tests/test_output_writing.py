"""How fusec writes OUT and `-o` files: permissions from the umask, nothing
left behind on SIGTERM or Ctrl-C, stale temporary folders removed, symbolic
links written through."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fusec.compiler import outputs
from fusec.compiler.cli import main

MODEL = """
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.exp %x : tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}
"""


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.mlir"
    path.write_text(MODEL)
    return path


@pytest.fixture
def umask_027() -> Iterator[None]:
    old = os.umask(0o027)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("umask_027")
def test_out_and_output_files_follow_the_umask(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main([str(model), "-o", str(out)]) == 0
    assert mode(out) == 0o750
    assert {mode(p) for p in out.iterdir()} == {0o640}
    assert main([str(model), "-o", str(tmp_path / "final.mlir")]) == 0
    assert mode(tmp_path / "final.mlir") == 0o640
    assert main(["run", str(out), "--device", "sim", "--output", str(tmp_path / "y.npz")]) == 0
    assert mode(tmp_path / "y.npz") == 0o640


KILL_WHILE_WRITING = """
import os, signal, sys, time
from fusec.compiler import compile as job
from fusec.compiler.cli import main

def savez(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(30)

job.np.savez = savez
sys.exit(main([sys.argv[1], "-o", sys.argv[2]]))
"""


def test_sigterm_while_writing_leaves_no_temporary_folder(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-c", KILL_WHILE_WRITING, str(model), str(out)],
                          capture_output=True, text=True, timeout=120, env=os.environ.copy())
    assert done.returncode == -signal.SIGTERM, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.mlir"]


def test_ctrl_c_while_replacing_keeps_the_old_out(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "out"
    assert main([str(model), "-o", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real_replace = os.replace
    calls: list[object] = []

    def interrupted(src: object, dst: object) -> None:
        calls.append(src)
        if len(calls) == 2:  # OUT moved aside, the new one not yet in place
            raise KeyboardInterrupt
        real_replace(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(outputs.os, "replace", interrupted)
    assert main([str(model), "-o", str(out)]) == 130
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.mlir", "out"]


def test_stale_temporary_folders_of_dead_fusec_runs_are_removed(
    model: Path, tmp_path: Path,
) -> None:
    dead = 2**22 + 12345  # above Linux's largest pid: no such process
    stale = tmp_path / f".out.fusec-tmp-{dead}-abc123"
    stale.mkdir()
    (stale / "plan.json").write_text("{}")
    old = tmp_path / f".out.fusec-old-{dead}"
    old.mkdir()
    (old / "kernels.py").write_text("")
    foreign = tmp_path / f".out.fusec-tmp-{dead}-zzz"  # holds a file fusec never writes
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("mine")
    mine = tmp_path / f".out.fusec-tmp-{os.getpid()}-live"  # a running process's
    mine.mkdir()
    assert main([str(model), "-o", str(tmp_path / "out")]) == 0
    assert not stale.exists() and not old.exists()
    assert (foreign / "thesis.tex").exists() and mine.exists()


def test_a_linked_out_is_written_through(model: Path, tmp_path: Path) -> None:
    real = tmp_path / "real"
    assert main([str(model), "-o", str(real)]) == 0
    (real / "report.md").write_text("old")
    link = tmp_path / "link"
    link.symlink_to(real)
    assert main([str(model), "-o", str(link)]) == 0
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert (real / "report.md").read_text() != "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "model.mlir", "real"]


def test_a_link_to_a_foreign_directory_is_refused(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("mine")
    (tmp_path / "link").symlink_to(precious)
    assert main([str(model), "-o", str(tmp_path / "link")]) == 1
    assert "is not a fusec output directory" in capsys.readouterr().err
    assert (tmp_path / "link").is_symlink() and (precious / "thesis.tex").exists()


def test_a_linked_output_file_is_written_through(model: Path, tmp_path: Path) -> None:
    real = tmp_path / "real.mlir"
    real.write_text("old")
    link = tmp_path / "link.mlir"
    link.symlink_to(real)
    assert main([str(model), "-o", str(link)]) == 0
    assert link.is_symlink() and "func.func @f" in real.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.mlir", "model.mlir",
                                                          "real.mlir"]
