"""The per-user key that signs OUT folders (`runtime/user_key.py`): made on
the first compile, private, the same key afterwards; an unusable key is an
error naming it, never a reason to trust an OUT; in-memory compiles need none."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

import fusec
from fusec.compiler.cli import main
from fusec.runtime import user_key

MODEL = """
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.tanh %x : tensor<4x8xf32>
  func.return %0 : tensor<4x8xf32>
}
"""


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "config" / "fusec"
    monkeypatch.setenv(user_key.CONFIG_DIR_ENV, str(folder))
    (tmp_path / "model.mlir").write_text(MODEL)
    return folder


def compile_out(tmp_path: Path, name: str = "out") -> int:
    return main([str(tmp_path / "model.mlir"), "-o", str(tmp_path / name)])


def run(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str = "out") -> tuple[int, str]:
    code = main(["run", str(tmp_path / name), "--device", "sim", "--check"])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    return code, err


def test_the_first_compile_makes_a_private_key(config: Path, tmp_path: Path) -> None:
    key = config / "out-key"
    assert not key.exists()
    assert compile_out(tmp_path) == 0
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(config.stat().st_mode) == 0o700
    text = key.read_text()
    assert len(text) == 65 and text.endswith("\n") and bytes.fromhex(text)
    assert compile_out(tmp_path, "again") == 0
    assert key.read_text() == text
    assert [p.name for p in config.iterdir()] == ["out-key"]  # no temporary file left


def test_a_key_made_meanwhile_by_another_process_is_kept(config: Path) -> None:
    first = user_key.load_key(create=True)
    user_key._create_key(config / "out-key")  # pyright: ignore[reportPrivateUsage]
    assert user_key.load_key(create=False) == first
    assert [p.name for p in config.iterdir()] == ["out-key"]


def test_the_default_folder_is_the_users_config_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(user_key.CONFIG_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert user_key.key_path() == tmp_path / "xdg" / "fusec" / "out-key"


@pytest.mark.parametrize(("damage", "said"), [
    (lambda k: k.write_text("not a key\n"), "is corrupt (expected 64 hex digits)"),
    (lambda k: k.write_text("ab" * 31 + "\n"), "is corrupt (expected 64 hex digits)"),
    (lambda k: k.chmod(0o644), "can be read or written by other users (mode 0644)"),
    (lambda k: (k.unlink(), k.mkdir()), "is not a regular file"),
])
def test_an_unusable_key_is_an_error_never_trust(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    damage: object, said: str,
) -> None:
    assert compile_out(tmp_path) == 0
    key = config / "out-key"
    damage(key)  # type: ignore[operator]
    code, err = run(tmp_path, capsys)
    assert code == 1 and f"the fusec key '{key}' {said}" in err, err
    assert compile_out(tmp_path, "other") == 1  # before compiling anything
    assert f"the fusec key '{key}' {said}" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()


def test_a_key_that_cannot_be_made_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "model.mlir").write_text(MODEL)
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(user_key.CONFIG_DIR_ENV, str(tmp_path / "file" / "sub"))
    assert compile_out(tmp_path) == 1
    err = capsys.readouterr().err
    assert "cannot create the fusec key" in err and "FUSEC_CONFIG_DIR" in err, err
    assert not (tmp_path / "out").exists()


def test_compiling_in_memory_needs_no_key(config: Path) -> None:
    model = fusec.compile(MODEL, device="sim")
    x = np.random.default_rng(4).standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_allclose(model(x), np.tanh(x), rtol=1e-5, atol=1e-6)
    assert not config.exists()


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners")
def test_the_key_file_may_be_a_link(config: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert compile_out(tmp_path) == 0
    kept = tmp_path / "dotfiles-key"
    (config / "out-key").rename(kept)
    (config / "out-key").symlink_to(kept)
    assert run(tmp_path, capsys)[0] == 0
