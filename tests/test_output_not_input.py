"""An output never destroys an input: `fusec m.mlir -o m.mlir` (by any name:
a symbolic or hard link, `--emit dot`, `fusec import`, an OUT that holds the
input) is refused before any work, the input left byte for byte; and a write
that fails half-way leaves neither a partial file nor a lost old one."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np
import pytest

from fusec.command import main
from fusec.compiler import outputs

MODEL = """
func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = nn.exp %x : tensor<4x8xf32>
  %1 = nn.neg %0 : tensor<4x8xf32>
  func.return %1 : tensor<4x8xf32>
}
"""
FUSEC = Path(sys.executable).parent / "fusec"  # the console script users run


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.mlir"
    path.write_text(MODEL)
    return path


def test_the_fusec_command_refuses_its_input_as_output(model: Path) -> None:
    before = model.read_bytes()
    done = subprocess.run([str(FUSEC), str(model), "-o", str(model)], capture_output=True,
                          text=True, timeout=300, env=os.environ.copy())
    assert done.returncode == 1, done.stderr
    assert f"error: input file '{model}' is the same as output file '{model}'" in done.stderr
    assert "Traceback" not in done.stderr
    assert model.read_bytes() == before


def _symlink(model: Path, other: Path) -> None:
    other.symlink_to(model.name)


def _hardlink(model: Path, other: Path) -> None:
    os.link(model, other)


@pytest.mark.parametrize("link", [_symlink, _hardlink], ids=["symlink", "hardlink"])
@pytest.mark.parametrize("extra", [[], ["--emit", "dot"], ["-p", "decompose"]],
                         ids=["ir", "dot", "passes"])
def test_the_input_under_another_name_is_refused(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    link: Callable[[Path, Path], None], extra: list[str],
) -> None:
    other = tmp_path / "other.mlir"
    link(model, other)
    before = model.read_bytes()
    assert main([str(model), "-o", str(other), *extra]) == 1
    assert "is the same as output file" in capsys.readouterr().err
    assert model.read_bytes() == before and other.read_bytes() == before


def test_a_pass_plugin_is_an_input_too(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    plugin = tmp_path / "my_pass.mlir"  # named .mlir so that -o takes it as a file
    plugin.write_text("# a plugin\n")
    assert main([str(model), "--load-pass-plugin", str(plugin), "-o", str(plugin)]) == 1
    assert f"input file '{plugin}' is the same as output file" in capsys.readouterr().err
    assert plugin.read_text() == "# a plugin\n"


def test_an_out_holding_the_input_is_not_replaced(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    assert main([str(model), "-o", str(out)]) == 0
    inside = out / "model.mlir"
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main([str(inside), "-o", str(out), "--no-fusion"]) == 1
    err = capsys.readouterr().err
    assert f"input file '{inside}' is inside the output directory '{out}'" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_an_out_that_is_the_input_file_is_refused(
    model: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    before = model.read_bytes()
    assert main([str(model), "-o", str(model.with_suffix(""))]) == 0  # a different OUT: fine
    plain = model.with_name("model.txt")
    plain.write_text(MODEL)
    assert main([str(plain), "-o", str(plain)]) == 1
    assert "is the same as output file" in capsys.readouterr().err
    assert plain.read_text() == MODEL and model.read_bytes() == before


def test_a_full_disk_keeps_the_old_output(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = tmp_path / "final.mlir"
    target.write_text("old result\n")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(outputs.os, "fsync", full)
    assert main([str(model), "-o", str(target)]) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert target.read_text() == "old result\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["final.mlir", "model.mlir"]


# --- fusec import ------------------------------------------------------------------------

def _onnx_model(path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)


def test_import_refuses_its_model_as_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    source = tmp_path / "a.onnx"
    _onnx_model(source)
    before = source.read_bytes()
    assert main(["import", str(source), "-o", str(source)]) == 1
    assert f"input file '{source}' is the same as output file" in capsys.readouterr().err
    assert source.read_bytes() == before


def test_an_interrupted_import_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = tmp_path / "a.onnx"
    _onnx_model(source)
    (tmp_path / "a.mlir").write_text("old model\n")
    (tmp_path / "a.params.npz").write_bytes(b"old params")
    real_savez = np.savez

    def interrupted(file: IO[bytes], *args: Any, **kwargs: Any) -> None:
        real_savez(file, *args, **kwargs)  # the bytes are written, then Ctrl-C comes
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", interrupted)
    argv = ["import", str(source), "-o", str(tmp_path / "a.mlir"), "--params-above", "0"]
    assert main(argv) == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.mlir", "a.onnx", "a.params.npz"]
    assert (tmp_path / "a.mlir").read_text() == "old model\n"
    assert (tmp_path / "a.params.npz").read_bytes() == b"old params"
    monkeypatch.setattr(np, "savez", real_savez)
    assert main(argv) == 0  # and a later import writes both whole
    with np.load(tmp_path / "a.params.npz") as params:
        assert list(params.files) == ["w"]
    assert "func.func" in (tmp_path / "a.mlir").read_text()


@pytest.mark.parametrize("target", ["model", "inputs", "plan"])
def test_run_output_never_replaces_what_it_reads(model: Path, tmp_path: Path,
                                                  target: str) -> None:
    """`fusec run --output` onto the model, the inputs file or a file of the
    OUT being run is refused before anything runs, the file left as it was."""
    out = tmp_path / "out"
    assert main([str(model), "-o", str(out)]) == 0
    inputs = tmp_path / "in.npz"
    np.savez(inputs, x=np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32))
    victim = {"model": model, "inputs": inputs, "plan": out / "plan.json"}[target]
    before = victim.read_bytes()
    run_model = model if target == "model" else out
    done = subprocess.run([str(FUSEC), "run", str(run_model), "--inputs", str(inputs),
                           "--output", str(victim)], capture_output=True, text=True,
                          timeout=300, env=os.environ.copy())
    assert done.returncode == 1, done.stderr
    assert "is the same as output file" in done.stderr
    assert "Traceback" not in done.stderr
    assert victim.read_bytes() == before
