"""The compiled-program cache of the command line's compile job
(compiler/cli_cache.py): a second `fusec MODEL -o OUT` of the same program
writes OUT from the cache (no pass runs, nothing is probed or built, the
compiler is not even imported) with the very files a compile writes; an
option that changes the output, a damaged entry, `--no-cache` and
`FUSEC_PROGRAM_CACHE=0` compile."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fusec
from fusec.codegen import build_pool
from fusec.codegen.kernel_probe import KernelProbe
from fusec.compiler import program_cache
from fusec.compiler.cli import main
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner
from fusec.reference.interpreter import find_function, random_inputs, run_function

# A constant (folded or kept), a matmul, a reduction and pointwise ops: every
# file of OUT has something in it.
MODEL = """
func.func @f(%x: tensor<8x16xf32>, %w: tensor<16x8xf32>) -> tensor<8x8xf32> {
  %c = nn.constant dense<0.5> : tensor<8xf32>
  %m = nn.matmul %x, %w : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %a = nn.add %m, %c : (tensor<8x8xf32>, tensor<8xf32>) -> tensor<8x8xf32>
  %s = nn.softmax %a {axis = 1} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %t = nn.tanh %s : tensor<8x8xf32>
  func.return %t : tensor<8x8xf32>
}
"""
OUT_FILES = ("plan.json", "kernels.py", "report.md", "model.mlir", "constants.npz",
             "fusec-out.json")
HIT = "written from the program cache"
DAMAGED = "fusec: warning: ignoring the compiled program"


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The cache on, in a folder of this test's; counts the passes run, the
    kernels probed and the kernels built."""
    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(program_cache.PROGRAM_CACHE_ENV, "1")
    (tmp_path / "model.mlir").write_text(MODEL)
    counts = {"passes": 0, "probes": 0, "builds": 0}

    def counting(what: str, real: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[what] += 1
            return real(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(PipelineRunner, "run", counting("passes", PipelineRunner.run))
    monkeypatch.setattr(KernelProbe, "count", counting("probes", KernelProbe.count))
    monkeypatch.setattr(KernelProbe, "prefetch", counting("probes", KernelProbe.prefetch))
    monkeypatch.setattr(build_pool, "kernel_code", counting("builds", build_pool.kernel_code))
    return counts


def compile_to(capsys: pytest.CaptureFixture[str], tmp_path: Path, out: str,
               *options: str, model: str = "model.mlir") -> str:
    """`fusec MODEL -o OUT OPTIONS` (exit 0); its stderr."""
    assert main([str(tmp_path / model), "-o", str(tmp_path / out), *options]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    return err


def entries(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "programs").glob("*/*"))


def same_files(a: Path, b: Path) -> None:
    for name in OUT_FILES:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def check_numbers(out: Path, seed: int) -> None:
    """OUT's kernels against the reference interpreter on fresh random inputs."""
    func = find_function(parse_module(make_context(), MODEL, "m.mlir"), None)
    inputs = random_inputs(func, np.random.default_rng(seed))
    expected = run_function(func, inputs)
    got = fusec.load_out(out, device="sim")(*inputs)
    np.testing.assert_allclose(np.asarray(got), expected[0], rtol=1e-5, atol=1e-6)


def test_a_second_compile_writes_out_from_the_cache(
        tmp_path: Path, work: dict[str, int], capsys: pytest.CaptureFixture[str]) -> None:
    first = compile_to(capsys, tmp_path, "out1")
    assert work["passes"] == 1 and HIT not in first
    assert len(entries(tmp_path)) == 1
    work.update(passes=0, probes=0, builds=0)
    second = compile_to(capsys, tmp_path, "out2")
    assert work == {"passes": 0, "probes": 0, "builds": 0}
    assert second.strip().splitlines() == [
        f"fusec: note: '{tmp_path / 'out2'}' {HIT} (--no-cache compiles again)"]
    same_files(tmp_path / "out1", tmp_path / "out2")  # the signature too: the same key signs
    assert program_cache.KEY_FIELD not in json.loads((tmp_path / "out2" / "plan.json").read_text())
    check_numbers(tmp_path / "out2", seed=7)
    assert main(["run", str(tmp_path / "out2"), "--check", "--device", "sim"]) == 0
    # --quiet: nothing said; an OUT written before is replaced.
    assert compile_to(capsys, tmp_path, "out2", "--quiet") == ""
    assert work["passes"] == 0
    same_files(tmp_path / "out1", tmp_path / "out2")


def test_an_out_from_the_cache_edited_is_refused_as_a_compiled_one_is(
        tmp_path: Path, work: dict[str, int], capsys: pytest.CaptureFixture[str]) -> None:
    compile_to(capsys, tmp_path, "out1")
    compile_to(capsys, tmp_path, "out2")
    assert work["passes"] == 1
    kernels = tmp_path / "out2" / "kernels.py"
    kernels.write_text(kernels.read_text() + "\n# edited\n")
    assert main(["run", str(tmp_path / "out2"), "--device", "sim"]) == 1
    assert "does not match the sha256 digest recorded in plan.json" in capsys.readouterr().err


@pytest.mark.parametrize("options", [
    ["--no-fusion"], ["--no-fold-constants"], ["--target", "a100"], ["--gemm", "fused"],
    ["--max-registers", "64"], ["--shared-memory-limit", "8192"], ["--check-precision"],
    ["--remarks-in-ir"], ["--no-library-epilogue"], ["--conv", "fused"], ["--conv-tf32"],
    ["--attention", "fused"],
    ["--insert-after", "decompose=cse"], ["-p", "decompose,group-each-op"],
])
def test_an_option_that_changes_the_output_compiles(
        tmp_path: Path, work: dict[str, int], capsys: pytest.CaptureFixture[str],
        options: list[str]) -> None:
    compile_to(capsys, tmp_path, "base")
    err = compile_to(capsys, tmp_path, "other", *options)
    assert work["passes"] == 2 and HIT not in err
    # ... and keeps what it compiled, under its own key.
    assert len(entries(tmp_path)) == 2
    again = compile_to(capsys, tmp_path, "again", *options)
    assert work["passes"] == 2 and HIT in again
    same_files(tmp_path / "other", tmp_path / "again")


def test_another_version_of_an_installed_pass_package_compiles(
        tmp_path: Path, work: dict[str, int], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`-p` may name a pass an installed package declares: its version is in the key."""
    from fusec.compiler import cli_cache

    pipeline = ["-p", "decompose,cse,group-each-op"]
    monkeypatch.setattr(cli_cache, "_pass_packages", lambda: [["my-pass", "m:P", "m", "1.0"]])
    compile_to(capsys, tmp_path, "out1", *pipeline)
    assert HIT in compile_to(capsys, tmp_path, "out2", *pipeline)
    monkeypatch.setattr(cli_cache, "_pass_packages", lambda: [["my-pass", "m:P", "m", "1.1"]])
    assert HIT not in compile_to(capsys, tmp_path, "out3", *pipeline)
    assert work["passes"] == 2
    # The default pipeline names only fusec's passes: the packages do not count.
    compile_to(capsys, tmp_path, "out4")
    monkeypatch.setattr(cli_cache, "_pass_packages", lambda: [["my-pass", "m:P", "m", "1.2"]])
    assert HIT in compile_to(capsys, tmp_path, "out5")
    assert work["passes"] == 3


def test_the_same_text_under_another_name_compiles(
        tmp_path: Path, work: dict[str, int], capsys: pytest.CaptureFixture[str]) -> None:
    """plan.json and report.md name the model: another name is another output."""
    (tmp_path / "copy.mlir").write_text(MODEL)
    compile_to(capsys, tmp_path, "out1")
    compile_to(capsys, tmp_path, "out2", model="copy.mlir")
    assert work["passes"] == 2 and len(entries(tmp_path)) == 2
    assert json.loads((tmp_path / "out2" / "plan.json").read_text())["source"] \
        == str(tmp_path / "copy.mlir")


def test_stdin_is_read_once_and_cached(tmp_path: Path, work: dict[str, int],
                                       capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    for out in ("out1", "out2"):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(MODEL.encode())))
        assert main(["-", "-o", str(tmp_path / out)]) == 0
    assert work["passes"] == 1 and HIT in capsys.readouterr().err
    same_files(tmp_path / "out1", tmp_path / "out2")
    assert json.loads((tmp_path / "out2" / "plan.json").read_text())["source"] == "<stdin>"


def _edit_plan(plan_path: Path, change: Any) -> None:
    plan = json.loads(plan_path.read_text())
    change(plan)
    plan_path.write_text(json.dumps(plan))


DAMAGE = {
    "kernels.py edited": lambda e: (e / "kernels.py").write_text(
        (e / "kernels.py").read_text() + "\nraise SystemExit\n"),
    "report.md edited": lambda e: (e / "report.md").write_text("nothing\n"),
    "model.mlir edited": lambda e: (e / "model.mlir").write_text("module {}\n"),
    "constants damaged": lambda e: (e / "constants.npz").write_bytes(b"PK\x03\x04 damaged"),
    "plan.json truncated": lambda e: (e / "plan.json").write_text(
        (e / "plan.json").read_text()[:100]),
    "plan.json unsigned": lambda e: _edit_plan(
        e / "plan.json", lambda p: p.pop("out_hmac_sha256")),
    "plan.json not an object": lambda e: (e / "plan.json").write_text("[1, 2]"),
    "kernels.py missing": lambda e: (e / "kernels.py").unlink(),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_entry_is_a_miss_said_once_and_replaced(
        tmp_path: Path, work: dict[str, int], capsys: pytest.CaptureFixture[str],
        damage: str) -> None:
    compile_to(capsys, tmp_path, "out1")
    (entry,) = entries(tmp_path)
    DAMAGE[damage](entry)
    err = compile_to(capsys, tmp_path, "out2")
    assert work["passes"] == 2 and HIT not in err
    assert [line for line in err.splitlines() if line.startswith("fusec: warning:")] \
        == [line for line in err.splitlines() if line.startswith(DAMAGED)]
    assert len(err.strip().splitlines()) == 1, err
    same_files(tmp_path / "out1", tmp_path / "out2")
    check_numbers(tmp_path / "out2", seed=11)
    # The entry was written again: the next compile reads it, with no warning.
    third = compile_to(capsys, tmp_path, "out3")
    assert work["passes"] == 2 and DAMAGED not in third and HIT in third
    same_files(tmp_path / "out1", tmp_path / "out3")


def test_an_entry_filed_under_another_key_is_a_miss(
        tmp_path: Path, work: dict[str, int], capsys: pytest.CaptureFixture[str]) -> None:
    """An entry moved to another key's folder (signed, but for other options) is not used."""
    compile_to(capsys, tmp_path, "fused")
    (fused,) = entries(tmp_path)
    compile_to(capsys, tmp_path, "unfused", "--no-fusion")
    (unfused,) = [e for e in entries(tmp_path) if e != fused]
    for name in OUT_FILES[:-1]:
        (unfused / name).write_bytes((fused / name).read_bytes())
    err = compile_to(capsys, tmp_path, "unfused2", "--no-fusion")
    assert work["passes"] == 3 and "stored under another key" in err
    same_files(tmp_path / "unfused", tmp_path / "unfused2")


@pytest.mark.parametrize("off", ["env", "flag"])
def test_the_cache_off_compiles_and_keeps_nothing(
        tmp_path: Path, work: dict[str, int], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, off: str) -> None:
    options = ["--no-cache"] if off == "flag" else []
    if off == "env":
        monkeypatch.setenv(program_cache.PROGRAM_CACHE_ENV, "0")
    compile_to(capsys, tmp_path, "out1", *options)
    compile_to(capsys, tmp_path, "out2", *options)
    assert work["passes"] == 2 and entries(tmp_path) == []
    # A filled cache is not read either.
    monkeypatch.setenv(program_cache.PROGRAM_CACHE_ENV, "1")
    compile_to(capsys, tmp_path, "out3")
    assert len(entries(tmp_path)) == 1
    if off == "env":
        monkeypatch.setenv(program_cache.PROGRAM_CACHE_ENV, "0")
    err = compile_to(capsys, tmp_path, "out4", *options)
    assert work["passes"] == 4 and HIT not in err
    same_files(tmp_path / "out1", tmp_path / "out4")


@pytest.mark.parametrize("options", [
    ["--remarks"], ["--mlir-timing"], ["--print-ir-after=decompose"],
])
def test_a_job_that_watches_the_passes_runs_them(
        tmp_path: Path, work: dict[str, int], capsys: pytest.CaptureFixture[str],
        options: list[str]) -> None:
    compile_to(capsys, tmp_path, "out1")
    err = compile_to(capsys, tmp_path, "out2", *options)
    assert work["passes"] == 2 and HIT not in err
    assert len(entries(tmp_path)) == 1  # and keeps nothing of its own


def test_a_hit_imports_neither_xdsl_nor_numba(tmp_path: Path) -> None:
    """The whole point of a hit is to skip the compiler's start-up too."""
    (tmp_path / "model.mlir").write_text(MODEL)
    env = {**os.environ, "FUSEC_CACHE_DIR": str(tmp_path / "cache"),
           program_cache.PROGRAM_CACHE_ENV: "1"}
    script = ("import sys\n"
              "from fusec.compiler.cli import main\n"
              f"code = main([{str(tmp_path / 'model.mlir')!r}, '-o', sys.argv[1]])\n"
              "print(code, sorted({m.split('.')[0] for m in sys.modules} & "
              "{'xdsl', 'numba', 'numpy'}))\n")
    runs = [subprocess.run([sys.executable, "-c", script, str(tmp_path / out)], env=env,
                           capture_output=True, text=True, check=True) for out in ("o1", "o2")]
    assert runs[0].stdout.split()[0] == "0" and "xdsl" in runs[0].stdout  # it compiled
    assert runs[1].stdout.strip() == "0 []", runs[1].stderr
    assert HIT in runs[1].stderr
    same_files(tmp_path / "o1", tmp_path / "o2")
