"""`--autotune` times cuDNN's fused attention against fusec's attention
kernel, per attention cuDNN can run (`passes/fuse_attention.py`,
`compiler/library_tuning.py`), through the real `fusec MODEL -o OUT
--autotune` with a fake GPU timer: the plan follows the timings, either way
the numbers match the reference in the simulator (cuDNN's call replaced by a
NumPy stand-in), a second compile times nothing, and `--attention library`
or `fused` is never overruled."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from test_autotune_library import (
    FakeEventTimer,
    check_numbers,
    fusec_autotune,
    plan_of,
    timed_by,
)
from test_library_attention import masked_text, vit_attention_text

import fusec.passes.fuse_attention as fuse_attention
from fusec.analysis.program import Program

TEXT = vit_attention_text(2, 3, 16, 8, "f16")
CAUSAL = masked_text(2, 3, 16, 8, "f16")


def _library(program: Program) -> bool:
    return any(la.library is not None for la in program.functions["f"].launches)


class AttentionTimer(FakeEventTimer):
    """cuDNN's call takes `library_us` per call, fusec's kernel `own_us`."""

    calls: ClassVar[list[list[tuple[int, bool]]]] = []
    library_us: ClassVar[float] = 3.0
    own_us: ClassVar[float] = 9.0

    def time_calls(self, programs: Sequence[Program]) -> list[list[float]]:
        type(self).calls.append([(0, _library(p)) for p in programs])
        return [[self.library_us if _library(p) else self.own_us] * 5 for p in programs]


@pytest.fixture(autouse=True)
def cudnn_attention(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A GPU as far as `--autotune` can tell, cuDNN's attention installed as
    far as the compiler can tell; a tuning cache of the test's own."""
    monkeypatch.setattr(fuse_attention, "sdpa_available", lambda: True)
    return timed_by(AttentionTimer, tmp_path, monkeypatch)


@pytest.fixture
def sdpa_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """cuDNN's attention computed by NumPy on the simulator's arrays, read
    and written through the launch's offsets and strides."""
    from fusec.runtime import cudnn_sdpa

    def view(a: Any, where: dict[str, Any]) -> np.ndarray:
        flat = np.asarray(a).reshape(-1)
        item = flat.itemsize
        return np.lib.stride_tricks.as_strided(
            flat[int(where["offset"]):], shape=tuple(where["dims"]),
            strides=tuple(item * int(s) for s in where["strides"]))

    def run_sdpa(spec: dict[str, Any], args: Sequence[Any], stream_ptr: int) -> None:
        q, k, v, o = (view(a, spec[n]) for a, n in zip(args, "qkvo", strict=True))
        s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k.astype(np.float64))
        s *= spec["scale"]
        if spec["causal"]:
            s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        o[...] = np.einsum("bhqk,bhkd->bhqd", p, v.astype(np.float64)).astype(o.dtype)

    monkeypatch.setattr(cudnn_sdpa, "check_sdpa", lambda spec: None)
    monkeypatch.setattr(cudnn_sdpa, "prepare_sdpa", lambda spec, args: None)
    monkeypatch.setattr(cudnn_sdpa, "run_sdpa", run_sdpa)


def _numbers(out: Path, text: str) -> None:
    check_numbers(out, text, rtol=2e-2, atol=2e-2)  # f16


def _sdpa_launches(out: Path) -> int:
    launches = plan_of(out)["functions"]["f"]["launches"]
    return sum(str(e.get("library", "")).startswith("cudnn_sdpa") for e in launches)


def test_measured_slower_cudnn_gives_way_to_fusecs_kernel(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], sdpa_stand_in: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(AttentionTimer, "library_us", 12.0)
    out, _ = fusec_autotune(tmp_path, TEXT, capsys)
    assert AttentionTimer.calls == [[(0, False), (0, True)]]
    assert _sdpa_launches(out) == 0
    assert len(plan_of(out)["functions"]["f"]["launches"]) == 1  # fusec's one kernel
    (choice,) = plan_of(out)["autotune"]["library_choices"]
    assert (choice["family"], choice["model"], choice["kept"]) == ("attention", "library", "own")
    report = (out / "report.md").read_text(encoding="utf-8")
    assert ("cuDNN's fused attention 12.0 us vs fusec's attention kernel 9.0 us: own "
            "(the model's choice (library) overruled)") in report
    _numbers(out, TEXT)


@pytest.mark.parametrize("text", [TEXT, CAUSAL], ids=["unmasked", "causal"])
def test_measured_faster_cudnn_is_kept_and_a_second_compile_times_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], sdpa_stand_in: None,
        text: str) -> None:
    first, _ = fusec_autotune(tmp_path, text, capsys, name="first")
    assert AttentionTimer.calls == [[(0, False), (0, True)]]
    assert _sdpa_launches(first) == 1
    _numbers(first, text)
    AttentionTimer.calls.clear()
    second, _ = fusec_autotune(tmp_path, text, capsys, name="second")
    assert AttentionTimer.calls == []
    assert plan_of(second)["functions"] == plan_of(first)["functions"]
    (choice,) = plan_of(second)["autotune"]["library_choices"]
    assert choice["from_cache"] and choice["kept"] == "library"


def test_measurement_overrules_a_model_that_chose_fusecs_kernel(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], sdpa_stand_in: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fuse_attention, "library_time", lambda shape, target, causal: 1.0)
    out, _ = fusec_autotune(tmp_path, TEXT, capsys)
    (choice,) = plan_of(out)["autotune"]["library_choices"]
    assert (choice["model"], choice["kept"]) == ("own", "library")
    assert _sdpa_launches(out) == 1
    _numbers(out, TEXT)


@pytest.mark.parametrize("mode", ["library", "fused"])
def test_an_explicit_attention_backend_is_never_timed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], sdpa_stand_in: None,
        monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    monkeypatch.setattr(AttentionTimer, "library_us", 12.0)
    out, _ = fusec_autotune(tmp_path, TEXT, capsys, "--attention", mode)
    assert AttentionTimer.calls == []
    assert _sdpa_launches(out) == (mode == "library")
    _numbers(out, TEXT)


def test_cudnn_measured_slower_where_the_model_prefers_three_kernels(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the model: fusec's kernel slower than the three-kernel path, cuDNN
    # faster than both; measured, cuDNN is slower than fusec's kernel, so the
    # attention goes back to the three-kernel path the model prefers to it
    monkeypatch.setattr(fuse_attention, "fused_time", lambda tile, shape, target: 1.0)
    monkeypatch.setattr(fuse_attention, "library_time", lambda shape, target, causal: 1e-6)
    monkeypatch.setattr(AttentionTimer, "library_us", 12.0)
    out, _ = fusec_autotune(tmp_path, TEXT, capsys)
    assert AttentionTimer.calls == [[(0, False), (0, True)]]
    launches = plan_of(out)["functions"]["f"]["launches"]
    assert _sdpa_launches(out) == 0 and len(launches) >= 3
    assert "missed: attention" in (out / "report.md").read_text(encoding="utf-8")
    _numbers(out, TEXT)
