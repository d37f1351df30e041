"""A tuning cache entry is data from outside the compiler: a hand-edited,
truncated, foreign or illegal one is a miss with a one-line warning naming
the entry and why, the group is timed again and its entry replaced, and the
program's numbers match the reference; never a traceback or a wrong number.

Through the real `fusec MODEL -o OUT --autotune` with a fake GPU timer (the
CUDA-event timer replaced, so that the cache is read as on a GPU), and
`compiler/tuning_entry.read_entry` directly."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import fusec
from fusec.analysis.program import KernelLaunch
from fusec.compiler.autotune import AutotuneOptions
from fusec.compiler.cli import main
from fusec.compiler.compile import compile_model
from fusec.compiler.parsing import make_context, parse_module
from fusec.dialects.fusion import GroupOp
from fusec.reference.interpreter import find_function, random_inputs, run_module

SOFTMAX = """
func.func @f(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %y = nn.softmax %x {axis = 1} : tensor<4x64xf32>
  func.return %y : tensor<4x64xf32>
}
"""
MATMUL = """
func.func @f(%a: tensor<8x16xf32>, %b: tensor<16x8xf32>, %c: tensor<8xf32>) -> tensor<8x8xf32> {
  %m = nn.matmul %a, %b : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %y = nn.add %m, %c : (tensor<8x8xf32>, tensor<8xf32>) -> tensor<8x8xf32>
  %z = nn.relu %y : tensor<8x8xf32>
  func.return %z : tensor<8x8xf32>
}
"""
CHAIN = """
func.func @f(%x: tensor<3x40xf32>, %b: tensor<40xf32>) -> tensor<3x40xf32> {
  %y = nn.add %x, %b : (tensor<3x40xf32>, tensor<40xf32>) -> tensor<3x40xf32>
  %z = nn.tanh %y : tensor<3x40xf32>
  func.return %z : tensor<3x40xf32>
}
"""

Entry = dict[str, Any]


class FakeEventTimer:
    """Stands in for `CudaEventTimer`: blocks of 128 threads are fastest."""

    def __init__(self, l2_bytes: int = 0) -> None:
        self.calls = 0

    def device_name(self) -> str:
        return "fake GPU (cc 9.0)"

    def time_group(self, kernel_source: str, launch: KernelLaunch,
                   arrays: Mapping[str, np.ndarray]) -> float:
        self.calls += 1
        return 0.5 if launch.block[0] == 128 else 2.0


@pytest.fixture(autouse=True)
def fake_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A GPU as far as `--autotune` can tell, timed by `FakeEventTimer`; the
    tuning cache in a folder of the test's own."""
    import fusec.runtime.device as device
    import fusec.runtime.tuning_timer as tuning_timer

    monkeypatch.setattr(device, "gpu_available", lambda: True)
    monkeypatch.setattr(tuning_timer, "CudaEventTimer", FakeEventTimer)
    folder = tmp_path / "tuning"
    monkeypatch.setenv("FUSEC_TUNING_CACHE", str(folder))
    return folder


def fusec_autotune(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str],
                   name: str = "out") -> tuple[str, str]:
    """`fusec m.mlir -o OUT --autotune --target h200`; (stderr, report.md)."""
    model = tmp_path / "m.mlir"
    model.write_text(text, encoding="utf-8")
    out = tmp_path / name
    code = main([str(model), "-o", str(out), "--autotune", "--target", "h200", "--quiet"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "Traceback" not in err and "internal error" not in err, err
    return err, (out / "report.md").read_text(encoding="utf-8")


def check_numbers(out: Path, text: str) -> None:
    """OUT's `@f` in the simulator against the reference, fresh random inputs."""
    reference = parse_module(make_context(), text, "t.mlir")
    inputs = random_inputs(find_function(reference, "f"), seed=11)
    expected = run_module(reference, inputs, "f")[0]
    got = fusec.load_out(out, device="sim")(*inputs)
    np.testing.assert_allclose(got, expected.astype(np.float32), rtol=1e-5, atol=1e-6)


def only_entry(cache: Path) -> Path:
    entries = sorted(cache.rglob("*.json"))
    assert len(entries) == 1, entries
    return entries[0]


def edited(change: Callable[[Entry], object]) -> Callable[[Path], None]:
    """A poisoning that edits the entry's JSON with `change` (which may
    return a replacement for the whole entry)."""
    def poison(path: Path) -> None:
        entry = json.loads(path.read_text(encoding="utf-8"))
        replaced = change(entry)
        path.write_text(json.dumps(replaced if replaced is not None else entry),
                        encoding="utf-8")
    return poison


def first_fields(entry: Entry) -> dict[str, Any]:
    """The model's schedule's fields (candidate 0: what the group runs when
    no other candidate is faster by the margin)."""
    fields: dict[str, Any] = entry["result"]["fused"]["candidates"][0]["fields"]
    return fields


def setting(key: str, value: object) -> Callable[[Path], None]:
    return edited(lambda e: first_fields(e).update({key: value}))


def _set(d: dict[str, Any], key: str, value: object) -> None:
    d[key] = value


POINTWISE = {"name": "fusion.pointwise", "fields": {"elements_per_thread": 4, "block": 128}}

# (id, program, poisoning, the reason the warning gives)
CASES: list[tuple[str, str, Callable[[Path], None], str]] = [
    ("lanes-1", SOFTMAX, setting("lanes", 1),
     "lanes = 1 is not among the"),
    ("online-1", SOFTMAX, setting("online", 1), "online = 1 is not among the"),
    ("tile-0", MATMUL, setting("bm", 0), "bm = 0 is not among the"),
    ("tile-2-31", MATMUL, edited(lambda e: first_fields(e).update(bm=2**31, bn=2**31)),
     "bm = 2147483648, bn = 2147483648 is not among the"),
    ("not-utf8", SOFTMAX, lambda p: p.write_bytes(b"\xff\xfe" + p.read_bytes()),
     "not UTF-8 text"),
    ("negative", SOFTMAX, setting("lanes", -32), "lanes must be >= 0, not -32"),
    ("float", MATMUL, setting("bk", 8.0), "bk = 8.0 is not an integer or a string"),
    ("bool", SOFTMAX, setting("online", False), "online = false is not an integer"),
    ("string-for-int", SOFTMAX, setting("lanes", "32"), "lanes"),
    ("null-field", MATMUL, setting("tm", None), "tm = null is not an integer"),
    ("unknown-field", SOFTMAX, setting("warps", 2), "unknown ['warps']"),
    ("unknown-result-field", SOFTMAX, edited(lambda e: _set(e["result"], "chosen", 1)),
     "unknown ['chosen']"),
    ("other-kind", SOFTMAX,
     edited(lambda e: e["result"]["fused"]["candidates"].__setitem__(0, POINTWISE)),
     "a fusion.pointwise schedule for a group scheduled as fusion.reduction"),
    ("unknown-choice", MATMUL, setting("impl", "tensor-cores"), "impl must be one of"),
    ("list-entry", SOFTMAX, edited(lambda e: [e]), "a JSON list, not an entry object"),
    ("list-result", SOFTMAX, edited(lambda e: _set(e, "result", [e["result"]])),
     "no result object"),
    ("truncated", MATMUL, lambda p: p.write_bytes(p.read_bytes()[:40]), "not JSON"),
    ("nan-time", SOFTMAX,
     edited(lambda e: e["result"]["fused"]["times_us"].__setitem__(0, float("nan"))),
     "fused.times_us[0] = nan is not a time"),
    ("empty-candidates", SOFTMAX,
     edited(lambda e: e["result"]["fused"].update(candidates=[], times_us=[])),
     "candidates must be a list as long as times_us"),
]


@pytest.mark.parametrize(("text", "poison", "why"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_poisoned_entry_is_a_miss_with_a_warning(
        tmp_path: Path, fake_gpu: Path, capsys: pytest.CaptureFixture[str], text: str,
        poison: Callable[[Path], None], why: str) -> None:
    fusec_autotune(tmp_path, text, capsys, "clean")
    entry = only_entry(fake_gpu)
    poison(entry)
    err, report = fusec_autotune(tmp_path, text, capsys)
    warnings = [line for line in err.splitlines() if line.startswith("fusec: warning:")]
    assert len(warnings) == 1, err
    assert f"ignoring the tuning cache entry '{entry}'" in warnings[0]
    assert why in warnings[0], warnings[0]
    assert "0 groups from the tuning cache, 1 timed" in report  # timed again
    check_numbers(tmp_path / "out", text)
    json.loads(entry.read_text(encoding="utf-8"))  # replaced whole on store


def test_replaced_entry_is_used_next_time(tmp_path: Path, fake_gpu: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    fusec_autotune(tmp_path, SOFTMAX, capsys, "clean")
    setting("lanes", 1)(only_entry(fake_gpu))
    err, _ = fusec_autotune(tmp_path, SOFTMAX, capsys, "retimed")
    assert "lanes = 1 is not among the" in err
    err, report = fusec_autotune(tmp_path, SOFTMAX, capsys)
    assert "warning" not in err
    assert "1 group from the tuning cache, 0 timed" in report


def test_entry_of_another_group_under_this_key(tmp_path: Path, fake_gpu: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A softmax group's result copied into the matmul's entry (key fixed up):
    its schedules are of another kind."""
    fusec_autotune(tmp_path, SOFTMAX, capsys, "softmax")
    softmax = json.loads(only_entry(fake_gpu).read_text(encoding="utf-8"))
    only_entry(fake_gpu).unlink()
    fusec_autotune(tmp_path, MATMUL, capsys, "matmul")
    entry = only_entry(fake_gpu)
    edited(lambda e: _set(e, "result", softmax["result"]))(entry)
    err, _ = fusec_autotune(tmp_path, MATMUL, capsys)
    assert "a fusion.reduction schedule for a group scheduled as fusion.contraction" in err
    check_numbers(tmp_path / "out", MATMUL)


def test_legal_alternative_written_by_hand_is_used(
        tmp_path: Path, fake_gpu: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An edit that gives another of the offered schedules is legal: used, no warning."""
    fusec_autotune(tmp_path, CHAIN, capsys, "clean")
    edited(lambda e: first_fields(e).update(block=256))(only_entry(fake_gpu))
    err, report = fusec_autotune(tmp_path, CHAIN, capsys)
    assert "warning" not in err
    assert "1 group from the tuning cache, 0 timed" in report
    check_numbers(tmp_path / "out", CHAIN)


def test_split_parts_must_be_the_groups_split(tmp_path: Path, fake_gpu: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A contested group's entry with a part too many is a miss, not the
    error it was (`apply`: the split has N parts, the group M)."""
    fusec_autotune(tmp_path, CHAIN, capsys, "clean")
    entry = only_entry(fake_gpu)
    data = json.loads(entry.read_text(encoding="utf-8"))
    parts = data["result"]["parts"]
    assert len(parts) == 2  # add and tanh: contested, timed split too
    for p in parts:  # the split parts fastest by far: the split would be applied
        p["times_us"] = [0.001] * len(p["times_us"])
        p["samples_us"] = [[0.001]] * len(p["times_us"])
    parts.append(parts[0])
    entry.write_text(json.dumps(data), encoding="utf-8")
    err, _ = fusec_autotune(tmp_path, CHAIN, capsys)
    assert "3 split parts, but the group splits into 2" in err
    check_numbers(tmp_path / "out", CHAIN)


def _group(text: str) -> GroupOp:
    art = compile_model(text, target="h200")
    return next(op for op in art.module.walk() if isinstance(op, GroupOp))


def test_read_entry_directly(tmp_path: Path, fake_gpu: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    """`read_entry` is a plain function: the entry autotuning wrote is read
    back with its schedules; an illegal one raises `BadEntry` with the reason."""
    from fusec.analysis.targets import get_target
    from fusec.compiler.tuning_entry import BadEntry, read_entry

    fusec_autotune(tmp_path, SOFTMAX, capsys, "clean")
    result = json.loads(only_entry(fake_gpu).read_text(encoding="utf-8"))["result"]
    group, target = _group(SOFTMAX), get_target("h200")
    limit = target.shared_memory_per_block
    tuned = read_entry(result, group, target, limit, 0.03)
    assert tuned.from_cache and len(tuned.fused.schedules) == len(result["fused"]["times_us"])
    result["fused"]["candidates"][0]["fields"]["lanes"] = 1
    with pytest.raises(BadEntry, match="lanes = 1 is not among the"):
        read_entry(result, group, target, limit, 0.03)
    with pytest.raises(BadEntry, match="the entry is a JSON list, not an object"):
        read_entry([result], group, target, limit, 0.03)


def test_whole_call_entry_with_bad_samples_is_timed_again(
        fake_gpu: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The whole-call check's entry: negative samples were taken as they
    were (the tuned program kept, slower as a whole); now a miss."""
    from test_autotune_decisions import Timer, _blocks

    def timer() -> Timer:  # each kernel faster alone, the call slower
        return Timer(fast_us=0.5, whole=lambda p: 3.0 if 128 in _blocks(p) else 2.0)

    def tune(t: Timer) -> set[int]:
        art = compile_model(CHAIN, fusion=False, target="h200",
                            autotune=AutotuneOptions(timer=t, device="fake GPU"))
        return set(_blocks(art.program))

    assert tune(timer()) == {256}  # the model's program kept
    whole = next(p for p in fake_gpu.rglob("*.json")
                 if "model_samples_us" in p.read_text(encoding="utf-8"))
    edited(lambda e: e["result"].update(model_samples_us=[-1e9] * 5))(whole)
    again = timer()
    assert tune(again) == {256}
    assert again.call_timings == 1
    err = capsys.readouterr().err
    assert f"ignoring the tuning cache entry '{whole}' (model_samples_us[0] = -1000000000.0 " \
        "is not a time in microseconds); timing the whole call again" in err
