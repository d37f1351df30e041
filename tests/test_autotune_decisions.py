"""Autotuning's decisions under noise, with injected timers (no GPU needed):
a candidate within the noise margin leaves the model's schedule, a clearly
faster one wins, the whole-call check gives up a tuned program that is
slower as a whole, a second compile times nothing at all (groups and whole
call), and the timer interleaves the candidates' batches. The `gpu` test
tunes the softmax model on the device."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest
from test_autotune import CHAIN
from test_autotune import _check_numbers as check_numbers

from fusec.analysis.program import KernelLaunch, Program
from fusec.compiler.autotune import AutotuneOptions
from fusec.compiler.compile import CompiledArtifacts, compile_model
from fusec.compiler.tuning_decision import NOISE_MARGIN, choose, ratio, slower_beyond
from fusec.runtime.plan_schema import check_plan
from fusec.runtime.tuning_timer import (
    CALIBRATION_LAUNCHES,
    MAX_COPIES,
    MIN_REPEATS,
    WARMUP_LAUNCHES,
    interleaved_samples,
    rotation_copies,
)

ROOT = Path(__file__).resolve().parent.parent


class Timer:
    """Per launch: `fast_us` for blocks of 128 threads, 1.0 otherwise (the
    model's schedules use 256). Whole calls: `whole(program)`; both count
    their calls."""

    def __init__(self, fast_us: float,
                 whole: Callable[[Program], float] | None = None) -> None:
        self.fast_us = fast_us
        self.whole = whole or (lambda p: sum(self._us(la) for la in _launches(p)))
        self.calls = 0
        self.call_timings = 0

    def _us(self, launch: KernelLaunch) -> float:
        return self.fast_us if launch.block[0] == 128 else 1.0

    def time_group(self, kernel_source: str, launch: KernelLaunch,
                   arrays: Mapping[str, np.ndarray]) -> float:
        self.calls += 1
        return self._us(launch)

    def time_calls(self, programs: Sequence[Program]) -> list[list[float]]:
        self.call_timings += 1
        return [[self.whole(p)] * MIN_REPEATS for p in programs]


def _launches(program: Program) -> list[KernelLaunch]:
    return [la for fp in program.functions.values() for la in fp.launches]


def _blocks(program: Program) -> list[int]:
    return [la.block[0] for la in _launches(program)]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "tuning"
    monkeypatch.setenv("FUSEC_TUNING_CACHE", str(folder))
    return folder


def _compile(timer: object, fusion: bool = False) -> CompiledArtifacts:
    return compile_model(CHAIN, fusion=fusion, target="h200",
                         autotune=AutotuneOptions(timer=timer, device="fake GPU"))  # type: ignore[arg-type]


def _check_numbers(art: CompiledArtifacts) -> None:
    check_numbers(art, CHAIN, seed=5)


def test_within_noise_margin_keeps_the_models_choice() -> None:
    timer = Timer(fast_us=1.0 - NOISE_MARGIN / 2)  # faster, but within the margin
    art = _compile(timer)
    assert timer.calls == 2 * 4 and timer.call_timings == 0  # nothing changed: no whole call
    assert set(_blocks(art.program)) == {256}
    launches = art.plan["functions"]["f"]["launches"]
    assert all(e["tuning_choice"] == "model: within the noise margin" for e in launches)
    assert all(e["measured_us"] == e["model_measured_us"] == 1.0 for e in launches)
    assert "fastest within the 3% noise margin" in art.report_md
    assert "Whole call: not checked (tuning kept the model's program)" in art.report_md
    assert "autotuned" not in art.model_mlir
    check_plan(json.loads(json.dumps(art.plan)), "plan.json", lambda _: True)


def test_clearly_faster_candidate_wins() -> None:
    timer = Timer(fast_us=0.5)
    art = _compile(timer)
    assert set(_blocks(art.program)) == {128}
    launches = art.plan["functions"]["f"]["launches"]
    assert all(e["tuning_choice"] == "tuned" and e["measured_us"] == 0.5
               and e["model_measured_us"] == 1.0 for e in launches)
    assert "fastest (50% faster)" in art.report_md
    assert timer.call_timings == 1
    assert art.plan["autotune"]["whole_call"] == {
        "model_us": 2.0, "tuned_us": 1.0, "kept": "tuned", "from_cache": False}
    assert "model's program 2.0 us, tuned program 1.0 us per call: kept the tuned program" \
        in art.report_md
    _check_numbers(art)


def test_whole_call_check_gives_up_a_tuned_program_slower_as_a_whole() -> None:
    # Each kernel is faster alone, the call is slower (say, L2 reuse lost).
    timer = Timer(fast_us=0.5, whole=lambda p: 3.0 if 128 in _blocks(p) else 2.0)
    art = _compile(timer)
    assert set(_blocks(art.program)) == {256}
    assert "autotuned" not in art.model_mlir and "block = 128" not in art.model_mlir
    assert art.tuning is not None and art.tuning.whole_call is not None
    assert art.tuning.whole_call.kept == "model"
    launches = art.plan["functions"]["f"]["launches"]
    assert all(e["tuning_choice"] == "model: whole call" and e["measured_us"] == 1.0
               for e in launches)
    assert "tuned program 3.0 us per call: kept the model's program" in art.report_md
    assert "given up for the whole call" in art.report_md
    _check_numbers(art)


def test_whole_call_within_the_margin_keeps_the_tuned_program() -> None:
    timer = Timer(fast_us=0.5, whole=lambda p: 2.0 * (1 + NOISE_MARGIN / 2)
                  if 128 in _blocks(p) else 2.0)
    art = _compile(timer)
    assert set(_blocks(art.program)) == {128}


def test_second_compile_times_nothing_at_all() -> None:
    first = _compile(Timer(fast_us=0.5, whole=lambda p: 3.0 if 128 in _blocks(p) else 2.0))
    assert first.tuning is not None and first.tuning.timings == 3  # two groups, one call
    timer = Timer(fast_us=0.5, whole=lambda p: 3.0 if 128 in _blocks(p) else 2.0)
    art = _compile(timer)
    assert timer.calls == 0 and timer.call_timings == 0
    assert art.tuning is not None and art.tuning.timings == 0
    assert "0 timings on the device" in art.report_md
    assert "Whole call (from the tuning cache)" in art.report_md
    assert set(_blocks(art.program)) == {256}
    assert art.plan["autotune"]["device_timings"] == 0
    assert art.plan["functions"] == first.plan["functions"]


def test_split_needs_more_than_the_margin() -> None:
    """A contested group is split only when its parts are faster by more
    than the margin."""

    class Contest(Timer):
        def _us(self, launch: KernelLaunch) -> float:
            # the two parts (1 us each) are faster than the fused kernel, within the margin
            return 2.0 * (1 + NOISE_MARGIN / 2) if len(launch.ops) > 1 else 1.0

    art = _compile(Contest(fast_us=1.0), fusion=True)
    assert len(_launches(art.program)) == 1
    assert "kept fused" in art.report_md


class Interleaved(Timer):
    """Times the candidates of a group together (`Interleaving`)."""

    def __init__(self) -> None:
        super().__init__(fast_us=0.5)
        self.groups: list[int] = []

    def time_candidates(self, kernel_source: str, launches: Sequence[KernelLaunch],
                        arrays: Sequence[Mapping[str, np.ndarray]]) -> list[list[float]]:
        assert len(launches) == len(arrays)
        for launch, own in zip(launches, arrays, strict=True):
            for a in launch.args:
                assert own[a.value].size == int(np.prod(a.view_shape))
        inputs = [a for a in launches[0].args if a.value in ("x", "b", "y")]
        for own in arrays[1:]:  # the same fresh random inputs for every candidate
            assert all(own[a.value] is arrays[0][a.value] for a in inputs)
        self.groups.append(len(launches))
        return [[self._us(la)] * MIN_REPEATS for la in launches]


def test_candidates_of_a_group_are_timed_together() -> None:
    timer = Interleaved()
    art = _compile(timer)
    assert timer.groups == [4, 4] and timer.calls == 0
    assert set(_blocks(art.program)) == {128}


def test_decision_pairs_interleaved_repeats() -> None:
    # The clocks drift up by 20% over the repeats; the candidate, measured
    # beside the model in every round, is 10% faster in each.
    model = [1.0 + 0.05 * r for r in range(5)]
    fast = [0.9 * m for m in model]
    assert ratio(model, fast) == pytest.approx(0.9)
    assert choose([model, fast]).chosen == 1
    same = [m * (1 - NOISE_MARGIN / 3) for m in model]
    c = choose([model, same])
    assert (c.chosen, c.fastest, c.kept_for_noise) == (0, 1, True)
    assert slower_beyond([1.0] * 5, [1.0 + 2 * NOISE_MARGIN] * 5)
    assert not slower_beyond([1.0] * 5, [1.0 + NOISE_MARGIN / 2] * 5)


class Clock:
    """A batch clock that records what was run, in order; `run` i takes
    `per_launch[i]` seconds per launch."""

    def __init__(self, per_launch: list[float]) -> None:
        self.per_launch = per_launch
        self.log: list[tuple[int, int]] = []

    def seconds(self, run: Callable[[int], None], n: int) -> float:
        run(n)
        index = run.index  # type: ignore[attr-defined]
        self.log.append((index, n))
        return self.per_launch[index] * n


def _runs(count: int, launched: list[tuple[int, int]]) -> list[Callable[[int], None]]:
    runs = []
    for i in range(count):
        def run(n: int, i: int = i) -> None:
            launched.append((i, n))
        run.index = i  # type: ignore[attr-defined]
        runs.append(run)
    return runs


def test_timer_warms_up_calibrates_and_interleaves() -> None:
    launched: list[tuple[int, int]] = []
    clock = Clock([1e-4, 2e-4, 5e-4])
    samples = interleaved_samples(_runs(3, launched), clock, budget_s=0.0)
    assert launched[:3] == [(0, WARMUP_LAUNCHES), (1, WARMUP_LAUNCHES), (2, WARMUP_LAUNCHES)]
    calibration = [(i, CALIBRATION_LAUNCHES) for i in range(3) for _ in range(2)]
    assert clock.log[:6] == calibration
    rounds = clock.log[6:]
    assert len(rounds) == 3 * MIN_REPEATS
    # batch sizes from the calibration: at least 1 ms of device time each
    assert {(i, n) for i, n in rounds} == {(0, 10), (1, 5), (2, 2)}
    # round r starts with candidate r mod 3: none is always first
    order = [i for i, _ in rounds]
    assert order[:9] == [0, 1, 2, 1, 2, 0, 2, 0, 1]
    assert [len(s) for s in samples] == [MIN_REPEATS] * 3
    assert samples[2][0] == pytest.approx(5e-4)


def test_rotation_covers_twice_the_l2() -> None:
    l2 = 50 << 20
    assert rotation_copies(200 << 20, l2) == 1  # larger than the L2: read from DRAM anyway
    assert rotation_copies(10 << 20, l2) == 10
    assert rotation_copies(1 << 10, l2) == MAX_COPIES


def _softmax() -> Path:
    for path in (ROOT.parent / "shared" / "models" / "softmax.mlir",
                 ROOT / "shared" / "models" / "softmax.mlir",
                 ROOT / "bench" / "models" / "softmax.mlir"):  # the same program
        if path.exists():
            return path
    raise FileNotFoundError("softmax.mlir")


@pytest.mark.gpu
def test_gpu_softmax_autotuned_is_not_slower_as_a_whole() -> None:
    art = compile_model(_softmax(), autotune=AutotuneOptions(quiet=True))
    tuning = art.tuning
    assert tuning is not None and tuning.timed >= 1
    w = tuning.whole_call
    if w is None:  # tuning kept every model schedule: the program is the model's
        assert not tuning.changed
    else:
        kept_us = w.tuned_us if w.kept == "tuned" else w.model_us
        assert kept_us <= w.model_us * (1 + NOISE_MARGIN), (w, tuning.summary())
    again = compile_model(_softmax(), autotune=AutotuneOptions(quiet=True))
    assert again.tuning is not None and again.tuning.timings == 0
    assert again.plan["functions"] == art.plan["functions"]


@pytest.mark.slow
def test_whole_calls_run_through_the_executors_on_rotating_copies(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`time_programs` (the device timer's whole calls), run in the
    simulator with a clock that counts calls instead of timing them: both
    programs on the same inputs, rotated over copies past the L2."""
    from fusec.runtime.call_timer import time_programs
    from fusec.runtime.device import cuda_module
    from fusec.runtime.executor import Executor

    cuda = cuda_module("sim")
    fused = compile_model(CHAIN, target="h200").program
    split = compile_model(CHAIN, fusion=False, target="h200").program
    inputs_seen: dict[int, set[int]] = {1: set(), 2: set()}
    launch = Executor.launch

    def spy(self: Executor, inputs: Sequence[object], *args: object,
            **kwargs: object) -> object:
        inputs_seen[len(self.fp.launches)].add(id(inputs[0]))
        return launch(self, inputs, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Executor, "launch", spy)
    batches: list[int] = []

    class CallClock:
        stream = cuda.stream()

        def seconds(self, run: Callable[[int], None], n: int) -> float:
            run(n)
            batches.append(n)
            return 2e-3 * n  # a batch of one call lasts the 1 ms asked (the simulator is slow)

    samples = time_programs(cuda, CallClock(), [fused, split], 60 << 20, 0.0, device="sim")
    assert [len(s) for s in samples] == [MIN_REPEATS] * 2
    assert all(s == pytest.approx(2000.0) for row in samples for s in row)
    assert batches == [CALIBRATION_LAUNCHES] * 4 + [1] * (2 * MIN_REPEATS)
    # a call of a few hundred bytes: a new copy of the inputs each call (up to
    # MAX_COPIES), the first the inputs both programs share
    calls = WARMUP_LAUNCHES + 2 * CALIBRATION_LAUNCHES + MIN_REPEATS
    assert len(inputs_seen[1]) == len(inputs_seen[2]) == calls < MAX_COPIES
    assert len(inputs_seen[1] & inputs_seen[2]) == 1
