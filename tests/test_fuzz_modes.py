"""The fuzzer's modes (`fuzz/modes.py`): a fixed-seed CI slice of each, what
each draws, the driver's `--mode` and `--sizes`, special inputs and triage.

Graph `i` of `MODE_SEED` in mode M is checked in the simulator against the
reference (fused, unfused and, with half types, with check-precision); the
first `MODE_DEFAULT` graphs of each mode run in the default set, the rest of
`MODE_SLICE` with the slow set.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.verify import verify_module
from fusec.fuzz import __main__ as driver
from fusec.fuzz.check import Outcome, check_text
from fusec.fuzz.generate import GenConfig
from fusec.fuzz.modes import MODES, Mode, mode_of, parse_modes
from fusec.fuzz.run import FuzzOptions, failure_file, fuzz_one, read_header
from fusec.fuzz.special import special_values, with_edge_values
from fusec.fuzz.triage import KNOWN_ITEMS, known_item

MODE_SEED = 2027
MODE_SLICE = 8
MODE_DEFAULT = 1  # per mode in the default set; the rest with the slow set
# Graphs of the slice that fail with a known bug another change fixes: a
# strict xfail each, so that the fix shows.
KNOWN_FAILURES: dict[tuple[str, int], str] = {}


def _slice_params() -> list[object]:
    params: list[object] = []
    for name in MODES:
        if name == "default" or MODES[name].check is not None:
            continue  # the default mode's slice is test_fuzz.py's
        for i in range(MODE_SLICE):
            marks: list[pytest.MarkDecorator] = []
            if i >= MODE_DEFAULT:
                marks.append(pytest.mark.slow)
            if (name, i) in KNOWN_FAILURES:
                marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[name, i]))
            params.append(pytest.param(name, i, marks=marks, id=f"{name}-{i}"))
    return params


@pytest.mark.parametrize(("mode", "index"), _slice_params())
def test_mode_slice(mode: str, index: int) -> None:
    """Graph `index` of mode `mode` matches the reference in the simulator."""
    options = FuzzOptions(seed=MODE_SEED, minimize=False, modes=(mode,), sizes="small")
    result = fuzz_one(index, options)
    if result.outcome.failed:
        graph_mode = MODES[mode]
        rng = graph_mode.rng(MODE_SEED, index)
        text = graph_mode.graph(rng, graph_mode.config(GenConfig(), "small")).text()
        like = f" (known: {result.known}, {KNOWN_ITEMS[result.known]})" if result.known else ""
        pytest.fail(f"{result.outcome}{like}\n{text}")


def _programs(mode: str, count: int) -> list[str]:
    m = MODES[mode]
    return [m.graph(m.rng(1, i), m.config(GenConfig(), "small")).text() for i in range(count)]


@pytest.mark.parametrize("mode", [m for m in MODES if MODES[m].check is None])
def test_every_mode_draws_valid_programs(mode: str) -> None:
    for i, text in enumerate(_programs(mode, 60)):
        verify_module(parse_module(make_context(), text, f"{mode}{i}.mlir"))


@pytest.mark.parametrize("half", ["f16", "bf16"])
def test_half_modes_draw_one_half_type(half: str) -> None:
    """Every float value of a half mode's program is that type, or f32 by a cast."""
    other = {"f16": "bf16", "bf16": "f16"}[half]
    texts = _programs(half, 40)
    assert all(f"x{half}>" in t or f"<{half}>" in t for t in texts)
    assert not any(re.search(f"[x<]{other}>", t) for t in texts)
    assert any("nn.cast" in t and "f32>" in t for t in texts)


def test_conv_and_recompute_modes_draw_their_shapes() -> None:
    convs = _programs("conv", 30)
    assert all("nn.conv2d" in t for t in convs)
    for op in ("nn.batch_norm", "nn.max_pool2d", "nn.avg_pool2d", "groups = 2", "dilations = [2"):
        assert any(op in t for t in convs), op
    reuse = _programs("recompute", 30)
    for op in ("nn.gather", "nn.transpose", "nn.reshape", "nn.reduce_"):
        assert any(op in t for t in reuse), op


def test_gpu_mode_sizes() -> None:
    """Small sizes stay simulator-sized; large ones span many blocks."""
    gpu = MODES["gpu"]
    small = gpu.config(GenConfig(), "small")
    large = gpu.config(GenConfig(), "large")
    assert small.max_elements <= 1500 < large.max_elements and large.large_dim >= 4096
    dims = [d for i in range(40)
            for a in gpu.graph(gpu.rng(3, i), large).args for d in a.type.shape]
    assert max(dims) > 1000
    for i in range(40):
        for a in gpu.graph(gpu.rng(3, i), small).args:
            assert int(np.prod(a.type.shape)) <= 1500 * 4


def test_mode_parsing_and_cycling() -> None:
    assert parse_modes([]) == ("default",)
    assert parse_modes(["bf16,conv", "f16", "conv"]) == ("bf16", "conv", "f16")
    assert parse_modes(["all"]) == tuple(MODES)
    with pytest.raises(ValueError, match="unknown mode 'nope'"):
        parse_modes(["nope"])
    assert [mode_of(i, ("f16", "conv")).name for i in range(4)] == ["f16", "conv"] * 2


def test_default_mode_draws_the_programs_seeds_drew_before_modes() -> None:
    """Old `--seed S --start i` reproducers still name the same program."""
    from fusec.fuzz.generate import random_graph

    m = MODES["default"]
    old = random_graph(np.random.default_rng([5, 9]), GenConfig()).text()
    assert m.graph(m.rng(5, 9), m.config(GenConfig(), "small")).text() == old


def test_special_inputs_hold_special_values() -> None:
    x = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)
    h = x.astype(np.float16)
    specials = [with_edge_values([x, h], seed, "special") for seed in range(20)]
    for dtype, got in ((np.float32, [s[0] for s in specials]),
                       (np.float16, [s[1] for s in specials])):
        with np.errstate(over="ignore"):
            allowed = np.asarray(special_values(np.dtype(dtype).name)).astype(dtype)
        was = x.astype(dtype)
        changed = np.concatenate([g[(g != was) | np.isnan(g)] for g in got])
        assert changed.size > 20
        assert np.all(np.isin(changed, allowed) | np.isnan(changed))
        assert np.isnan(changed).any() and np.isinf(changed).any()
    assert all(s[0].dtype == np.float32 and s[1].dtype == np.float16 for s in specials)
    np.testing.assert_array_equal(with_edge_values([x], 3, "no")[0], x)


def test_special_values_in_a_program_are_checked_in_place() -> None:
    """A NaN or inf from a special input must appear where the reference has it."""
    text = ("func.func @f(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {\n"
            "  %y = nn.mul %x, %x : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>\n"
            "  func.return %y : tensor<3x4xf32>\n}\n")
    assert check_text(text, 4, "special") == Outcome("ok")


def test_headers_carry_special_inputs() -> None:
    text = failure_file("func.func @f() {\n}\n", Outcome("mismatch", "compare-fused", "x"),
                        12, "special", None, "python -m fusec.fuzz --mode special")
    assert read_header(text) == (12, "special", None)
    assert "// inputs: seed=12 edges=special" in text


def test_issue_28_failures_are_new_not_known() -> None:
    """Issue 28's items 4-6 are fixed: a MemoryError, a SyntaxError or a fused
    rejection that the unfused compile accepts is a new failure again."""
    text = """func.func @f(%x: tensor<2x2xf32>, %i: tensor<2xi64>)
    -> (tensor<2xf32>, tensor<2x2xf32>) {
  %c = nn.exp %x : tensor<2x2xf32>
  %g = nn.gather %c, %i {axis = 0} : (tensor<2x2xf32>, tensor<2xi64>) -> tensor<2x2xf32>
  %s = nn.reduce_sum %g {axes = [0]} : (tensor<2x2xf32>) -> tensor<2xf32>
  %n = nn.neg %c : tensor<2x2xf32>
  func.return %s, %n : tensor<2xf32>, tensor<2x2xf32>
}
"""
    refused = Outcome("rejected", "compile-fused", "cannot read nn.gather in a reduction kernel")
    assert known_item(text, refused, 0, "no") is None
    assert known_item(text, Outcome("error", "compile-fused", "SyntaxError: x"), 0, "no") is None
    assert known_item(text, Outcome("error", "compile-fused", "MemoryError: "), 0, "no") is None


def test_a_mode_with_its_own_check_is_one_table_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mode that checks something else (a poisoned cache) plugs in as a row."""
    seen: list[tuple[int, int]] = []

    def check(index: int, seed: int) -> Outcome:
        seen.append((index, seed))
        return Outcome("mismatch", "cache", "poisoned") if index == 1 else Outcome("ok")

    monkeypatch.setitem(MODES, "probe", Mode("probe", "a test row", check=check))
    results = [fuzz_one(i, FuzzOptions(seed=4, modes=("probe",))) for i in range(2)]
    assert seen == [(0, 4), (1, 4)]
    assert [r.category for r in results] == ["ok", "mismatch cache new"]


def test_driver_runs_the_gpu_mode_small_in_the_simulator(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`--mode gpu` asks for a device (it does not force the simulator); with
    no GPU that is the simulator, and small sizes run there."""
    asked: list[str] = []

    def select_device(kind: str) -> str:
        asked.append(kind)
        return "sim"

    monkeypatch.setattr("fusec.runtime.device.select_device", select_device)
    code = driver.main(["--mode", "gpu", "--sizes", "small", "--graphs", "2", "--seed", "3",
                        "--no-minimize", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert asked[0] == "auto"  # then the executor asks for "sim"
    assert code == 0, out
    assert re.search(r"^ +2  gpu +ok$", out, re.M)


def test_driver_refuses_an_unknown_mode(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        driver.main(["--mode", "nope", "--graphs", "0"])
    assert "unknown mode 'nope'" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("mode", [m for m in MODES if MODES[m].check is not None])
def test_modes_with_their_own_check_run_from_the_driver(mode: str) -> None:
    """Graph 0 of each such mode (poison-tuning, ...) passes through `fuzz_one`."""
    result = fuzz_one(0, FuzzOptions(seed=MODE_SEED, modes=(mode,)))
    assert result.mode == mode
    assert not result.outcome.failed, result.outcome
