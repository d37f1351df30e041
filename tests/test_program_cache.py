"""The compiled-program cache of `fusec.compile` (compiler/program_cache.py):
a model compiled before is read back, not compiled again; anything that would
make the entry wrong (other options, another fusec, a damaged or moved entry)
compiles again, and a damaged entry is said once and replaced."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fusec
from fusec.compiler import program_cache, python_api
from fusec.compiler.parsing import make_context, parse_module
from fusec.reference.interpreter import find_function, random_inputs, run_function

PROGRAM = """
func.func @f(%x: tensor<8x32xf32>, %w: tensor<32xf32>) -> tensor<8x32xf32> {
  %a = nn.mul %x, %w : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %s = nn.softmax %a {axis = 1} : (tensor<8x32xf32>) -> tensor<8x32xf32>
  %t = nn.tanh %s : tensor<8x32xf32>
  func.return %t : tensor<8x32xf32>
}
"""


@pytest.fixture
def compiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The cache on, in a folder of this test's; counts the real compiles."""
    monkeypatch.setenv("FUSEC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(program_cache.PROGRAM_CACHE_ENV, "1")
    calls: list[str] = []
    real = python_api.compile_model

    def counted(source: Any, **kwargs: Any) -> Any:
        calls.append(str(source))
        return real(source, **kwargs)

    monkeypatch.setattr(python_api, "compile_model", counted)
    return calls


def _check(compile_it: Callable[[], Any], seed: int) -> None:
    """The compiled model against the reference on fresh random inputs."""
    func = find_function(parse_module(make_context(), PROGRAM, "m.mlir"), None)
    inputs = random_inputs(func, np.random.default_rng(seed))
    expected = run_function(func, inputs)
    got = compile_it()(*inputs)
    np.testing.assert_allclose(np.asarray(got), expected[0], rtol=1e-5, atol=1e-6)


def _entries(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "programs").glob("*/*"))


def test_a_second_compile_reads_the_first(tmp_path: Path, compiles: list[str]) -> None:
    _check(lambda: fusec.compile(PROGRAM, device="sim"), seed=1)
    _check(lambda: fusec.compile(PROGRAM, device="sim"), seed=2)
    assert len(compiles) == 1
    assert len(_entries(tmp_path)) == 1


def test_other_options_or_another_fusec_compile_again(tmp_path: Path, compiles: list[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _check(lambda: fusec.compile(PROGRAM, device="sim"), seed=3)
    _check(lambda: fusec.compile(PROGRAM, device="sim", fusion=False), seed=4)
    assert len(compiles) == 2
    monkeypatch.setattr(program_cache, "source_digest", lambda: "an edited fusec")
    _check(lambda: fusec.compile(PROGRAM, device="sim"), seed=5)
    assert len(compiles) == 3 and len(_entries(tmp_path)) == 3


def test_no_cache_asked_or_autotune_compiles_and_keeps_nothing(
        tmp_path: Path, compiles: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _check(lambda: fusec.compile(PROGRAM, device="sim", cache=False), seed=6)
    _check(lambda: fusec.compile(PROGRAM, device="sim", cache=False), seed=7)
    monkeypatch.setenv(program_cache.PROGRAM_CACHE_ENV, "0")
    _check(lambda: fusec.compile(PROGRAM, device="sim"), seed=8)
    assert len(compiles) == 3 and _entries(tmp_path) == []


@pytest.mark.parametrize("damage", ["kernels", "plan", "unsigned", "moved"])
def test_a_damaged_entry_is_compiled_again_and_replaced(
        damage: str, tmp_path: Path, compiles: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    _check(lambda: fusec.compile(PROGRAM, device="sim"), seed=9)
    (entry,) = _entries(tmp_path)
    if damage == "kernels":
        path = entry / "kernels.py"
        path.write_text(path.read_text() + "\nimport os  # planted\n")
    elif damage == "plan":
        (entry / "plan.json").write_text("{broken")
    elif damage == "unsigned":
        text = (entry / "plan.json").read_text()
        (entry / "plan.json").write_text(text.replace('"out_hmac_sha256"', '"x_hmac"'))
    capsys.readouterr()
    if damage == "moved":
        # A whole, signed entry filed under another program's key: its signed
        # plan names the key it was stored under, so it is refused.
        store = program_cache.ProgramStore(tmp_path / "cache" / "programs")
        moved = store.entry("e" * 64)
        moved.parent.mkdir(parents=True, exist_ok=True)  # the real key may share "ee"
        shutil.copytree(entry, moved)
        assert store.load("e" * 64) is None
        assert "stored under another key" in capsys.readouterr().err
        assert store.load(entry.name) is not None
        return
    _check(lambda: fusec.compile(PROGRAM, device="sim"), seed=10)
    err = capsys.readouterr().err
    assert err.count("ignoring the compiled program") == 1, err
    assert len(compiles) == 2
    _check(lambda: fusec.compile(PROGRAM, device="sim"), seed=11)  # replaced: a hit again
    assert len(compiles) == 2
    assert "ignoring" not in capsys.readouterr().err


def test_large_folded_constants_are_not_kept(tmp_path: Path, compiles: list[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(program_cache, "MAX_ENTRY_CONSTANT_BYTES", -1)
    _check(lambda: fusec.compile(PROGRAM, device="sim"), seed=12)
    assert _entries(tmp_path) == []


def test_torch_partitions_come_from_the_cache_unless_remarks_are_asked(
        compiles: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    from fusec.importers.torch.backend import fusec_backend

    module = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU()).eval()
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(0))

    def first_call(options: dict[str, Any] | None = None) -> Any:
        torch._dynamo.reset()  # a new compile, as a new process makes
        compiled = torch.compile(module, backend=fusec_backend, options=options)
        with torch.no_grad():
            return compiled(x)

    expected = module(x).detach()
    torch.testing.assert_close(first_call(), expected, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(first_call(), expected, rtol=1e-4, atol=1e-5)
    assert len(compiles) == 1
    capsys.readouterr()
    torch.testing.assert_close(first_call({"remarks": True}), expected, rtol=1e-4, atol=1e-5)
    assert len(compiles) == 2 and "partition" in capsys.readouterr().err


def test_the_least_recently_used_entries_go_past_the_cap(
        tmp_path: Path, compiles: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(program_cache, "MAX_ENTRIES", 2)
    first = PROGRAM
    second = PROGRAM.replace("nn.tanh", "nn.sigmoid")
    third = PROGRAM.replace("nn.tanh", "nn.relu")
    fusec.compile(first, device="sim")
    fusec.compile(second, device="sim")
    for path in _entries(tmp_path):  # both older than now
        os.utime(path / "plan.json", (1_000_000, 1_000_000))
    fusec.compile(first, device="sim")  # a hit: the first is the most recently used
    assert len(compiles) == 2
    fusec.compile(third, device="sim")  # one too many: the second goes
    assert len(_entries(tmp_path)) == 2 and len(compiles) == 3
    fusec.compile(first, device="sim")
    assert len(compiles) == 3  # still kept
    fusec.compile(second, device="sim")
    assert len(compiles) == 4  # compiled again


def test_a_program_from_the_cache_starts_no_build_workers(
        compiles: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU a compile starts the build workers before its front end; a
    program read back from the cache compiles nothing and starts none."""
    from fusec.codegen import build_pool

    started: list[int] = []
    made: list[str] = []

    class Model:  # the GPU model, without a GPU: records what was made
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append("cached" if "kernels_path" in kwargs else "compiled")

        def start_kernel_builds(self) -> int:
            return 0

    monkeypatch.setattr(python_api, "select_device", lambda _device: "gpu")
    monkeypatch.setattr(python_api, "CompiledModel", Model)
    monkeypatch.setattr(build_pool, "start_workers", lambda: started.append(1))
    fusec.compile(PROGRAM)
    fusec.compile(PROGRAM)
    assert made == ["compiled", "cached"] and len(compiles) == 1
    assert started == [1]


def test_timing_says_where_a_compile_went_and_a_cache_hit_compiles_nothing(
        tmp_path: Path, compiles: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    _check(lambda: fusec.compile(PROGRAM, device="sim", timing=True), seed=11)
    err = capsys.readouterr().err
    assert "fusec: compile of <model>:" in err and "Execution time report" in err
    for row in ("(program cache lookup)", "form-fusion-groups", "tile-and-promote",
                "(code generation)", "(program cache store)", "(starting kernel builds)"):
        assert row in err, row
    _check(lambda: fusec.compile(PROGRAM, device="sim", timing=True), seed=12)
    err = capsys.readouterr().err
    assert "(program cache lookup)" in err and "form-fusion-groups" not in err
    assert len(compiles) == 1
    _check(lambda: fusec.compile(PROGRAM, device="sim"), seed=13)
    assert "Execution time report" not in capsys.readouterr().err


def test_ptxas_wait_reaches_register_budget_and_the_key(
        tmp_path: Path, compiles: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from fusec.analysis.diagnostics import FusecError

    seen: list[object] = []
    counted = python_api.compile_model

    def capture(source: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["schedule"].ptxas_wait)
        return counted(source, **kwargs)

    monkeypatch.setattr(python_api, "compile_model", capture)
    _check(lambda: fusec.compile(PROGRAM, device="sim", ptxas_wait=None), seed=14)
    # waiting for no build is the default: the same options, the same key
    _check(lambda: fusec.compile(PROGRAM, device="sim"), seed=15)
    _check(lambda: fusec.compile(PROGRAM, device="sim", ptxas_wait=0), seed=16)
    assert seen == [None, 0.0] and len(compiles) == 2
    for bad in (-1.0, float("nan")):
        with pytest.raises(FusecError, match="ptxas_wait must be None or >= 0 seconds"):
            fusec.compile(PROGRAM, device="sim", ptxas_wait=bad)
