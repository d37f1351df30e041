"""Autotuning with an injected timer (no GPU needed): the fastest candidate
is kept, the times reach plan.json and report.md, the tuning cache makes a
second compile time nothing, a corrupted entry is timed again, and a
contested fused group is split when its parts are faster. The `gpu` tests
tune real kernels."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.program import KernelLaunch
from fusec.compiler.autotune import NO_GPU_NOTE, AutotuneOptions
from fusec.compiler.cli import main
from fusec.compiler.compile import CompiledArtifacts, compile_model
from fusec.compiler.parsing import make_context, parse_module
from fusec.reference.interpreter import find_function, random_inputs, run_module
from fusec.runtime.compiled_model import CompiledModel
from fusec.runtime.plan_schema import check_plan

CHAIN = """
func.func @f(%x: tensor<3x40xf32>, %b: tensor<40xf32>) -> tensor<3x40xf32> {
  %y = nn.add %x, %b : (tensor<3x40xf32>, tensor<40xf32>) -> tensor<3x40xf32>
  %z = nn.tanh %y : tensor<3x40xf32>
  func.return %z : tensor<3x40xf32>
}
"""


class FakeTimer:
    """Blocks of 128 threads are fastest; a kernel of several ops costs
    `fused_us` (set it high to make the split parts win)."""

    def __init__(self, fused_us: float = 1.0) -> None:
        self.calls = 0
        self.fused_us = fused_us

    def time_group(self, kernel_source: str, launch: KernelLaunch,
                   arrays: Mapping[str, np.ndarray]) -> float:
        self.calls += 1
        assert launch.kernel in kernel_source
        assert {a.value for a in launch.args} <= set(arrays)
        for a in launch.args:  # what the device timer reshapes each argument to
            assert arrays[a.value].size == int(np.prod(a.view_shape)), (a.value, a.view_shape)
        base = self.fused_us if len(launch.ops) > 1 else 1.0
        return base * (0.5 if launch.block[0] == 128 else 2.0)


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "tuning"
    monkeypatch.setenv("FUSEC_TUNING_CACHE", str(folder))
    return folder


def _compile(timer: FakeTimer, text: str = CHAIN, fusion: bool = True) -> CompiledArtifacts:
    return compile_model(text, fusion=fusion, target="h200",
                         autotune=AutotuneOptions(timer=timer, device="fake GPU"))


def _check_numbers(art: CompiledArtifacts, text: str = CHAIN, seed: int = 3,
                   rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """The tuned program's `@f` in the simulator against the reference."""
    model = CompiledModel(art.program, art.memory, art.plan, device="sim")
    reference = parse_module(make_context(), text, "t.mlir")
    inputs = random_inputs(find_function(reference, "f"), seed=seed)
    expected = run_module(reference, inputs, "f")[0]
    np.testing.assert_allclose(model(*inputs), expected.astype(np.float32), rtol=rtol,
                               atol=atol)


def test_fastest_candidate_is_kept_and_reported(_cache: Path) -> None:
    timer = FakeTimer()
    art = _compile(timer, fusion=False)  # two single-op groups: nothing contested
    assert timer.calls == 2 * 4  # top-k 4 per group
    launches = art.plan["functions"]["f"]["launches"]
    assert [tuple(e["block"]) for e in launches] == [(128, 1, 1)] * 2
    assert all(e["measured_us"] == 0.5 and e["tuned_candidates"] == 4 for e in launches)
    assert "block = 128" in art.model_mlir
    check_plan(json.loads(json.dumps(art.plan)), "plan.json", lambda _: True)
    bad = json.loads(json.dumps(art.plan))
    bad["functions"]["f"]["launches"][0]["measured_us"] = "fast"
    with pytest.raises(FusecError, match="measured_us"):
        check_plan(bad, "plan.json", lambda _: True)
    assert "## Autotuning" in art.report_md
    assert "0 groups from the tuning cache, 2 timed" in art.report_md
    row = next(line for line in art.report_md.splitlines() if line.startswith("| g0 "))
    assert "block = 256" in row and "block = 128" in row and "| 2.0 |" in row
    assert len(list(_cache.rglob("*.json"))) == 2
    _check_numbers(art)


def test_second_compile_times_nothing() -> None:
    _compile(FakeTimer(), fusion=False)
    timer = FakeTimer()
    art = _compile(timer, fusion=False)
    assert timer.calls == 0
    assert "2 groups from the tuning cache, 0 timed" in art.report_md
    launches = art.plan["functions"]["f"]["launches"]
    assert [tuple(e["block"]) for e in launches] == [(128, 1, 1)] * 2


def test_same_group_in_another_model_is_cached() -> None:
    _compile(FakeTimer(), fusion=False)
    other = CHAIN.replace("%x", "%input").replace("@f", "@g").replace("%z", "%out")
    timer = FakeTimer()
    art = _compile(timer, text=other, fusion=False)
    assert timer.calls == 0 and art.tuning is not None and art.tuning.cached == 2


def test_corrupted_entry_is_retimed(_cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _compile(FakeTimer(), fusion=False)
    entry = sorted(_cache.rglob("*.json"))[0]
    entry.write_text("{not json", encoding="utf-8")
    timer = FakeTimer()
    art = _compile(timer, fusion=False)
    assert timer.calls == 4
    assert "ignoring the tuning cache entry" in capsys.readouterr().err
    assert art.tuning is not None and (art.tuning.cached, art.tuning.timed) == (1, 1)
    json.loads(entry.read_text(encoding="utf-8"))  # rewritten whole


def test_split_when_parts_are_faster() -> None:
    timer = FakeTimer(fused_us=100.0)
    art = _compile(timer)
    launches = art.plan["functions"]["f"]["launches"]
    assert len(launches) == 2
    assert all(e["measured_us"] == 0.5 for e in launches)
    assert "split into 2 kernels by autotuning" in art.report_md
    assert "fused 50.0 us, split 1.0 us" in art.report_md
    _check_numbers(art)


def test_kept_fused_when_fused_is_faster() -> None:
    art = _compile(FakeTimer(fused_us=1.0))
    assert len(art.plan["functions"]["f"]["launches"]) == 1
    assert "kept fused" in art.report_md
    _check_numbers(art)


def test_autotune_without_gpu_notes_and_compiles(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import fusec.runtime.device as device

    monkeypatch.setattr(device, "gpu_available", lambda: False)
    model = tmp_path / "m.mlir"
    model.write_text(CHAIN, encoding="utf-8")
    assert main([str(model), "-o", str(tmp_path / "out"), "--autotune"]) == 0
    assert NO_GPU_NOTE in capsys.readouterr().err
    plan = json.loads((tmp_path / "out" / "plan.json").read_text(encoding="utf-8"))
    assert all("measured_us" not in e for e in plan["functions"]["f"]["launches"])


def test_top_k_needs_autotune(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = tmp_path / "m.mlir"
    model.write_text(CHAIN, encoding="utf-8")
    assert main([str(model), "-o", str(tmp_path / "out"), "--autotune-top-k", "2"]) == 1
    assert "--autotune-top-k applies to --autotune" in capsys.readouterr().err


SOFTMAX = """
func.func @f(%x: tensor<512x1000xf32>) -> tensor<512x1000xf32> {
  %y = nn.softmax %x {axis = 1} : tensor<512x1000xf32>
  func.return %y : tensor<512x1000xf32>
}
"""
POINTWISE = """
func.func @f(%x: tensor<1024x1024xf32>, %b: tensor<1024xf32>) -> tensor<1024x1024xf32> {
  %y = nn.add %x, %b : (tensor<1024x1024xf32>, tensor<1024xf32>) -> tensor<1024x1024xf32>
  %t = nn.tanh %y : tensor<1024x1024xf32>
  %z = nn.mul %t, %x : (tensor<1024x1024xf32>, tensor<1024x1024xf32>) -> tensor<1024x1024xf32>
  func.return %z : tensor<1024x1024xf32>
}
"""


@pytest.mark.gpu
@pytest.mark.parametrize("text", [SOFTMAX, POINTWISE], ids=["softmax", "pointwise"])
def test_gpu_autotune(text: str) -> None:
    art = compile_model(text, autotune=AutotuneOptions())
    assert art.tuning is not None and art.tuning.timed >= 1
    for e in art.plan["functions"]["f"]["launches"]:
        assert e["measured_us"] > 0 and e["tuned_candidates"] >= 1
    model = CompiledModel(art.program, art.memory, art.plan, device="gpu")
    reference = parse_module(make_context(), text, "t.mlir")
    inputs = random_inputs(find_function(reference, "f"), seed=1)
    expected = run_module(reference, inputs, "f")[0]
    np.testing.assert_allclose(model(*inputs), expected.astype(np.float32), rtol=1e-4,
                               atol=1e-5)
    again = compile_model(text, autotune=AutotuneOptions())
    assert again.tuning is not None and again.tuning.timed == 0
    assert again.plan["functions"]["f"]["launches"] == art.plan["functions"]["f"]["launches"]


COLUMN_SUM = """
func.func @f(%x: tensor<8192x64xf32>) -> tensor<1x64xf32> {
  %s = nn.reduce_sum %x {axes = [0], keepdims = true} : (tensor<8192x64xf32>) -> tensor<1x64xf32>
  func.return %s : tensor<1x64xf32>
}
"""


@pytest.mark.slow
def test_candidates_with_differently_sized_workspaces_get_their_own(no_ptxas_probe: None) -> None:
    """A split reduction's workspace grows with its splits: each candidate
    is timed on arrays of its own sizes (the device timer reshapes them)."""
    timer = FakeTimer()
    art = _compile(timer, COLUMN_SUM)
    assert timer.calls > 1
    _check_numbers(art, COLUMN_SUM)


GATHER = """
func.func @f(%table: tensor<50x8xf32>, %ids: tensor<64xi64>) -> tensor<64x8xf32> {
  %g = nn.gather %table, %ids {axis = 0} : (tensor<50x8xf32>, tensor<64xi64>) -> tensor<64x8xf32>
  %y = nn.tanh %g : tensor<64x8xf32>
  func.return %y : tensor<64x8xf32>
}
"""


class RecordingTimer(FakeTimer):
    """Keeps the integer arrays each timed launch was given."""

    def __init__(self) -> None:
        super().__init__()
        self.integers: list[np.ndarray] = []

    def time_group(self, kernel_source: str, launch: KernelLaunch,
                   arrays: Mapping[str, np.ndarray]) -> float:
        self.integers += [arrays[a.value] for a in launch.args
                          if arrays[a.value].dtype.kind in "iu"]
        return super().time_group(kernel_source, launch, arrays)


def test_gather_indices_are_timed_scattered_over_the_table() -> None:
    """The indices a gather is timed on are random below the table's size,
    not all 0 (one cache-hot row that no real input reads)."""
    timer = RecordingTimer()
    art = _compile(timer, GATHER)
    assert timer.integers
    for ids in timer.integers:
        assert ids.min() >= 0 and ids.max() < 50
        assert len(np.unique(ids)) > 20  # 64 draws below 50: many distinct rows
    _check_numbers(art, GATHER)


def test_whole_calls_are_timed_on_gather_indices_below_the_table() -> None:
    """The program carries each index input's bound (codegen, from the
    gathers it feeds): the whole-call timer's inputs (library-or-own
    choices, the autotuner's last check) are scattered rows, not index 0."""
    from fusec.runtime.call_timer import random_inputs as timing_inputs

    fp = compile_model(GATHER, target="h200").program.functions["f"]
    _, ids = fp.inputs
    assert fp.index_bounds == {ids: 50}
    host = timing_inputs(fp, seed=3)
    assert host[0].dtype == np.float32 and host[0].std() > 0.5  # N(0, 1), never zeros
    assert host[1].dtype == np.int64 and host[1].min() >= 0 and host[1].max() < 50
    assert len(np.unique(host[1])) > 20
