"""A compile on the GPU it targets times each convolution's cuDNN call and
weighs the measurement, not the model's estimate, against the own kernel
(`compiler/library_clock.py`). Here the clock is a fake (the CPU has no GPU):
the plan follows it, the numbers match the reference in the simulator
(cuDNN replaced by a NumPy stand-in), a second compile times nothing, a
broken cache entry is timed again, and without a usable GPU (or with
`--no-library-timing`) nothing is timed. The real clock is tested on the GPU
(tests/test_gpu_library_conv.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fusec.analysis.targets import TARGETS, Target
from fusec.compiler import library_clock
from fusec.compiler.library_clock import MeasuredLibraryCalls, call_fingerprint
from fusec.passes import tile_and_promote
from fusec.runtime.tuning_cache import TuningCache
from fusec.scheduling.library_tuning import LibraryCall
from tests.fake_cudnn import install_fake_cudnn
from tests.test_autotune_library import check_numbers, fusec_out, plan_of
from tests.test_library_conv import conv_text

# A dense f16 convolution the model gives to cuDNN (its call estimated near 1 us).
BIG = conv_text("f16", n=4, c=64, hw=16, o=64)


class FakeClock:
    """Microseconds per call, the same for every call; counts the calls timed."""

    def __init__(self, us: float) -> None:
        self.us = us
        self.timed: list[LibraryCall] = []

    def __call__(self, call: LibraryCall) -> float:
        self.timed.append(call)
        return self.us


@pytest.fixture
def clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    """cuDNN counted as installed and computed by NumPy; the compile's
    library clock a `FakeClock` (1000 us unless a test changes it) with a
    tuning cache of the test's own."""
    monkeypatch.setattr(tile_and_promote, "cudnn_available", lambda: True)
    install_fake_cudnn(monkeypatch)
    fake = FakeClock(1000.0)
    monkeypatch.setenv("FUSEC_TUNING_CACHE", str(tmp_path / "tuning"))

    def tuner(target: Target, cache: TuningCache | None) -> MeasuredLibraryCalls:
        return MeasuredLibraryCalls(fake, lambda: "fake GPU (cc 9.0)", target, cache)

    monkeypatch.setattr(library_clock, "measured_library_calls", tuner)
    return fake


def compile_out(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str], *flags: str,
                name: str = "out") -> tuple[Path, str]:
    return fusec_out(tmp_path, text, capsys, "--remarks", "--no-cache", *flags, name=name)


def library_launches(out: Path) -> list[dict[str, object]]:
    return [la for la in plan_of(out)["functions"]["f"]["launches"] if "library" in la]


def test_a_call_measured_slower_than_the_own_kernel_keeps_the_own_kernel(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], clock: FakeClock) -> None:
    out, err = compile_out(tmp_path, BIG, capsys)
    launches = plan_of(out)["functions"]["f"]["launches"]
    assert len(launches) == 1 and not library_launches(out)  # one fused kernel, no cuDNN
    assert len(clock.timed) == 1
    call = clock.timed[0]
    assert call.spec()["library"] == "cudnn_conv_f16"
    assert call.shapes == ((4, 64, 16, 16), (64, 64, 3, 3), (4, 64, 16, 16))
    assert "cuDNN's call measured 1000.0 us" in err
    assert "own (the model's choice overruled)" in err


@pytest.mark.slow  # a minute of the simulator: the own kernel of a 64-channel conv
def test_the_own_kernel_a_measurement_kept_matches_the_reference(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], clock: FakeClock) -> None:
    out, _ = compile_out(tmp_path, BIG, capsys)
    assert not library_launches(out)
    check_numbers(out, BIG, rtol=2e-2, atol=2e-2)


def test_a_call_measured_fast_takes_the_library_and_its_epilogue(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], clock: FakeClock) -> None:
    clock.us = 0.5
    out, err = compile_out(tmp_path, BIG, capsys)
    launches = plan_of(out)["functions"]["f"]["launches"]
    assert len(launches) == 2 and len(library_launches(out)) == 1  # cuDNN, then the epilogue
    assert "library (the model's choice)" in err
    check_numbers(out, BIG, rtol=2e-2, atol=2e-2)


def test_a_second_compile_reads_the_measurement_from_the_tuning_cache(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], clock: FakeClock) -> None:
    compile_out(tmp_path, BIG, capsys)
    assert len(clock.timed) == 1
    out, err = compile_out(tmp_path, BIG, capsys, name="again")
    assert len(clock.timed) == 1, "timed again despite the cache"
    assert "measured 1000.0 us (from the tuning cache)" in err
    assert not library_launches(out)


@pytest.mark.parametrize("poison", ["fast", float("inf"), -3.0, True])
def test_a_broken_cache_entry_is_timed_again_and_replaced(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], clock: FakeClock,
        poison: object) -> None:
    compile_out(tmp_path, BIG, capsys)
    (entry,) = (tmp_path / "tuning").rglob("*.json")
    data = json.loads(entry.read_text(encoding="utf-8"))
    data["result"] = {"library_call_us": poison}
    entry.write_text(json.dumps(data), encoding="utf-8")
    _, err = compile_out(tmp_path, BIG, capsys, name="again")
    assert len(clock.timed) == 2
    assert "ignoring the tuning cache entry" in err and "library_call_us" in err
    assert json.loads(entry.read_text(encoding="utf-8"))["result"] == {"library_call_us": 1000.0}


def test_no_library_timing_leaves_the_choice_to_the_model(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], clock: FakeClock) -> None:
    out, err = compile_out(tmp_path, BIG, capsys, "--no-library-timing")
    assert not clock.timed and "measured" not in err
    assert len(library_launches(out)) == 1  # the model's choice


def test_explicit_conv_modes_are_never_overruled(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], clock: FakeClock) -> None:
    out, _ = compile_out(tmp_path, BIG, capsys, "--conv", "library")
    assert not clock.timed and len(library_launches(out)) == 1


def test_a_call_that_cannot_be_timed_keeps_the_model_s_choice() -> None:
    from fusec.analysis.diagnostics import FusecError
    from fusec.scheduling.library_tuning import ChoicePoint

    def refuse(call: LibraryCall) -> float:
        raise FusecError("cuDNN has no algorithm")

    call = LibraryCall((("library", "cudnn_conv_f16"),), ((1, 8, 4, 4), (8, 8, 1, 1),
                                                           (1, 8, 4, 4)))
    tuner = MeasuredLibraryCalls(refuse, lambda: "fake GPU", TARGETS["h200"])
    point = ChoicePoint("conv", None, True, 5.0, 9.0, True, "", lambda m, mode: None,  # type: ignore[arg-type]
                        call, 3.0)
    assert tuner.choose(point) == (True, "cuDNN's call could not be timed (cuDNN has no "
                                         "algorithm); the model's choice kept")
    # GEMMs, and choices without a call to time, are the model's
    gemm = ChoicePoint("gemm", None, False, 5.0, 9.0, True, "", lambda m, mode: None)  # type: ignore[arg-type]
    assert tuner.choose(gemm) == (False, "")


def test_calls_differing_in_any_key_or_shape_are_measured_apart() -> None:
    a = LibraryCall((("library", "cudnn_conv_f16"), ("strides", [1, 1])),
                    ((1, 8, 4, 4), (8, 8, 1, 1), (1, 8, 4, 4)))
    b = LibraryCall((("library", "cudnn_conv_f16"), ("strides", [2, 2])), a.shapes)
    c = LibraryCall(a.keys, ((2, 8, 4, 4), (8, 8, 1, 1), (2, 8, 4, 4)))
    assert len({call_fingerprint(x) for x in (a, b, c)}) == 3


def test_without_a_gpu_nothing_is_timed() -> None:
    # the test machine has none (or runs the simulator)
    assert library_clock.measured_library_calls(TARGETS["h200"], None) is None


class BothTimed:
    """Stands in for the autotuner's `ChoiceTuner`: says own, and what it was asked."""

    def __init__(self) -> None:
        self.asked: list[bool] = []

    def choose(self, point: object) -> tuple[bool, str]:
        self.asked.append(point.model_library)  # type: ignore[attr-defined]
        return False, "timed both: own"

    def overrules(self, family: str) -> bool:
        return True


@pytest.mark.parametrize(("call_us", "close"), [(45.0, True), (5.0, False), (200.0, False)])
def test_a_close_call_is_decided_by_timing_both_sides(call_us: float, close: bool) -> None:
    from fusec.scheduling.library_tuning import ChoicePoint

    both = BothTimed()
    call = LibraryCall((("library", "cudnn_conv_f16"),), ((1, 8, 4, 4), (8, 8, 1, 1),
                                                           (1, 8, 4, 4)))
    tuner = MeasuredLibraryCalls(lambda c: call_us, lambda: "fake GPU", TARGETS["h200"], None,
                                 lambda: both)
    # estimates: the call 40 of the library's 50 us (10 us of epilogue), own 60 us
    point = ChoicePoint("conv", None, True, 50.0, 60.0, True, "", lambda m, mode: None,  # type: ignore[arg-type]
                        call, 40.0)
    library, note = tuner.choose(point)
    if close:  # 45 + 10 = 55 us against 60: timed whole, the measured call's choice first
        assert both.asked == [True] and (library, note.endswith("a close call: timed both: own")) \
            == (False, True)
    else:
        assert both.asked == [] and library == (call_us + 10.0 < 60.0)


def test_a_gpu_failure_while_timing_is_a_call_not_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    from fusec.runtime import library_clock as clock

    freed: list[bool] = []

    class Pool:
        def free_all_blocks(self) -> None:
            freed.append(True)

    class FakeCupy:
        @staticmethod
        def get_default_memory_pool() -> Pool:
            return Pool()

    def out_of_memory(*_: object) -> float:
        raise MemoryError("Out of memory allocating 1,048,576 bytes")

    monkeypatch.setattr(clock, "_cupy", lambda: FakeCupy)
    monkeypatch.setattr(clock, "conv_call_us", out_of_memory)
    call = LibraryCall((("library", "cudnn_conv_f16"),), ((1, 8, 4, 4), (8, 8, 1, 1),
                                                           (1, 8, 4, 4)))
    with pytest.raises(clock.ClockUnavailable, match="MemoryError: Out of memory"):
        clock.time_call(call, 50 << 20)
    assert freed == [True]
    with pytest.raises(clock.ClockUnavailable, match="no clock for 'cublas_gemm' calls"):
        clock.time_call(LibraryCall((("library", "cublas_gemm"),), ()), 50 << 20)


def test_another_clock_method_or_fusec_version_times_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], clock: FakeClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A measurement taken another way (the first clock timed calls one by
    one and measured cuDNN's host time) is never read back as this one's."""
    compile_out(tmp_path, BIG, capsys)
    monkeypatch.setattr(library_clock, "CLOCK_METHOD", "calls enqueued one by one")
    compile_out(tmp_path, BIG, capsys, name="method")
    monkeypatch.setattr(library_clock, "__version__", "0.0.0-other")
    compile_out(tmp_path, BIG, capsys, name="version")
    assert len(clock.timed) == 3
    assert len(list((tmp_path / "tuning").rglob("*.json"))) == 3
