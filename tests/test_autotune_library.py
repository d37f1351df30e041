"""`--autotune` times the library call against fusec's own kernel, per
convolution and matmul whose choice the cost model made
(`compiler/library_tuning.py`), through the real `fusec MODEL -o OUT
--autotune` with a fake GPU timer: the plan follows the timings, the numbers
match the reference in the simulator (cuDNN and cuBLAS replaced by NumPy
stand-ins), a second compile times nothing, a poisoned entry is a miss, an
explicit `--conv`/`--gemm` wins, and where nothing can be timed the model's
choice stays with a remark."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import fusec
from fusec.analysis.program import KernelLaunch, Program
from fusec.compiler.autotune import NO_GPU_NOTE
from fusec.compiler.cli import main
from fusec.compiler.parsing import make_context, parse_module
from fusec.passes import tile_and_promote
from fusec.reference.interpreter import find_function, random_inputs, run_module
from fusec.scheduling import gemm_choice
from tests.fake_cudnn import install_fake_cudnn
from tests.fake_cupy import install_fake_cupy, out_matmul
from tests.test_tuning_cache_entries import MATMUL

# Two independent convolutions + bias + relu: 3 input channels (7x7, stride 2)
# and 8 input channels (3x3). The cost model gives both fusec's own kernel.
ATTRS = "dilations = [1, 1], groups = 1"
TWO_CONVS = f"""
func.func @f(%a: tensor<1x3x9x9xf32>, %wa: tensor<4x3x7x7xf32>, %ba: tensor<4x1x1xf32>,
             %x: tensor<1x8x6x6xf32>, %wx: tensor<5x8x3x3xf32>, %bx: tensor<5x1x1xf32>)
    -> (tensor<1x4x5x5xf32>, tensor<1x5x6x6xf32>) {{
  %ca = nn.conv2d %a, %wa {{strides = [2, 2], pads = [3, 3, 3, 3], {ATTRS}}}
      : (tensor<1x3x9x9xf32>, tensor<4x3x7x7xf32>) -> tensor<1x4x5x5xf32>
  %sa = nn.add %ca, %ba : (tensor<1x4x5x5xf32>, tensor<4x1x1xf32>) -> tensor<1x4x5x5xf32>
  %ya = nn.relu %sa : tensor<1x4x5x5xf32>
  %cx = nn.conv2d %x, %wx {{strides = [1, 1], pads = [1, 1, 1, 1], {ATTRS}}}
      : (tensor<1x8x6x6xf32>, tensor<5x8x3x3xf32>) -> tensor<1x5x6x6xf32>
  %sx = nn.add %cx, %bx : (tensor<1x5x6x6xf32>, tensor<5x1x1xf32>) -> tensor<1x5x6x6xf32>
  %yx = nn.relu %sx : tensor<1x5x6x6xf32>
  func.return %ya, %yx : tensor<1x4x5x5xf32>, tensor<1x5x6x6xf32>
}}
"""

# Microseconds per call of a variant, by its input channels (conv) or K
# (matmul): (library, own). 3 channels: the library is slower; 8: faster.
TIMES = {3: (9.0, 4.0), 8: (2.0, 6.0), 16: (1.0, 5.0)}


def _size(program: Program) -> int:
    """The channels of the variant's convolution input, or its matmul's K."""
    fp = program.functions["f"]
    shapes = [fp.values[v].shape for v in fp.inputs]
    four = [s for s in shapes if len(s) == 4]
    return four[0][1] if four else shapes[0][-1]


class FakeEventTimer:
    """Stands in for `CudaEventTimer`: every schedule takes 1 us; a
    library-or-own variant takes its `TIMES` entry."""

    calls: ClassVar[list[list[tuple[int, bool]]]] = []  # per time_calls: (size, library)
    times: ClassVar[dict[int, tuple[float, float]]] = TIMES

    def __init__(self, l2_bytes: int = 0) -> None:
        pass

    def device_name(self) -> str:
        return "fake GPU (cc 9.0)"

    def time_group(self, kernel_source: str, launch: KernelLaunch,
                   arrays: Mapping[str, np.ndarray]) -> float:
        assert launch.library is None, "a library call timed as a kernel"
        assert launch.kernel in kernel_source
        return 1.0

    def time_calls(self, programs: Sequence[Program]) -> list[list[float]]:
        seen = []
        out = []
        for p in programs:
            library = any(la.library is not None for la in p.functions["f"].launches)
            seen.append((_size(p), library))
            out.append([self.times[_size(p)][0 if library else 1]] * 5)
        type(self).calls.append(seen)
        return out


@pytest.fixture(autouse=True)
def fake_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A GPU as far as `--autotune` can tell, cuDNN and CuPy counted as
    installed (the compiler never loads them); the tuning cache a folder of
    the test's own."""
    monkeypatch.setattr(tile_and_promote, "cudnn_available", lambda: True)
    monkeypatch.setattr(gemm_choice, "library_available", lambda: True)
    return timed_by(FakeEventTimer, tmp_path, monkeypatch)


def timed_by(timer: type[FakeEventTimer], tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> Path:
    """A GPU as far as `--autotune` can tell, `timer` its clock (its calls
    emptied), and a tuning cache folder under `tmp_path`, which is returned."""
    import fusec.runtime.device as device
    import fusec.runtime.tuning_timer as tuning_timer

    monkeypatch.setattr(device, "gpu_available", lambda: True)
    monkeypatch.setattr(tuning_timer, "CudaEventTimer", timer)
    monkeypatch.setattr(timer, "calls", [])
    folder = tmp_path / "tuning"
    monkeypatch.setenv("FUSEC_TUNING_CACHE", str(folder))
    return folder


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch) -> None:
    """cuDNN's convolution and CuPy's matmul computed by NumPy on the
    simulator's arrays."""
    install_fake_cudnn(monkeypatch)
    install_fake_cupy(monkeypatch, out_matmul(np.matmul))


def fusec_autotune(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str],
                   *flags: str, name: str = "out") -> tuple[Path, str]:
    """`fusec m.mlir -o OUT --autotune --target h200 FLAGS`; (OUT, stderr)."""
    return fusec_out(tmp_path, text, capsys, "--autotune", "--quiet", *flags, name=name)


def fusec_out(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str],
              *flags: str, name: str = "out") -> tuple[Path, str]:
    """`fusec m.mlir -o OUT --target h200 FLAGS`, which must succeed; (OUT, stderr)."""
    model = tmp_path / "m.mlir"
    model.write_text(text, encoding="utf-8")
    out = tmp_path / name
    code = main([str(model), "-o", str(out), "--target", "h200", *flags])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "Traceback" not in err and "internal error" not in err, err
    return out, err


def plan_of(out: Path) -> dict[str, Any]:
    plan: dict[str, Any] = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    return plan


def check_numbers(out: Path, text: str, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    """OUT's `@f` in the simulator against the reference, fresh random inputs."""
    reference = parse_module(make_context(), text, "t.mlir")
    inputs = random_inputs(find_function(reference, "f"), seed=5)
    expected = run_module(reference, inputs, "f")
    got = fusec.load_out(out, device="sim")(*inputs)
    got = got if isinstance(got, tuple | list) else (got,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(np.asarray(g, np.float32), e.astype(np.float32),
                                   rtol=rtol, atol=atol)


def choice_entries(cache: Path) -> list[Path]:
    """The tuning cache entries of library-or-own choices."""
    return sorted(p for p in cache.rglob("*.json")
                  if "choice" in json.loads(p.read_text(encoding="utf-8"))["result"])


def test_each_convolution_takes_what_measured_faster(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], stand_ins: None) -> None:
    out, _ = fusec_autotune(tmp_path, TWO_CONVS, capsys)
    plan = plan_of(out)
    launches = plan["functions"]["f"]["launches"]
    library = [e for e in launches if "library" in e]
    # 3 channels: own kernel (faster, the model's); 8 channels: the library
    # call (faster, overruling the model) and its epilogue kernel
    assert len(launches) == 3 and len(library) == 1
    assert library[0]["library"] == "cudnn_conv_f32"
    assert library[0]["args"][0]["view_shape"] == [1, 8, 6, 6]
    assert sorted(FakeEventTimer.calls) == [[(3, False), (3, True)], [(8, False), (8, True)]]
    choices = plan["autotune"]["library_choices"]
    assert sorted((c["family"], c["model"], c["kept"], c["library_us"], c["own_us"])
                  for c in choices) == [("conv", "own", "library", 2.0, 6.0),
                                        ("conv", "own", "own", 9.0, 4.0)]
    assert all(c["est_own_us"] < c["est_library_us"] for c in choices)  # the model's view
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "Library call or own kernel" in report
    assert "library or own: 2 choices, 0 from the tuning cache, 2 timed" in report
    assert "cuDNN + epilogue 2.0 us vs own kernel 6.0 us: library (the model's choice " \
        "(own) overruled)" in report
    check_numbers(out, TWO_CONVS)


def test_library_slower_everywhere_keeps_the_own_kernels(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FakeEventTimer, "times", {3: (9.0, 4.0), 8: (7.0, 6.0)})
    out, _ = fusec_autotune(tmp_path, TWO_CONVS, capsys)
    launches = plan_of(out)["functions"]["f"]["launches"]
    assert len(launches) == 2 and not any("library" in e for e in launches)
    check_numbers(out, TWO_CONVS)


def test_matmul_takes_the_library_gemm_when_measured_faster(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], stand_ins: None) -> None:
    out, _ = fusec_autotune(tmp_path, MATMUL, capsys, "--no-library-epilogue")
    launches = plan_of(out)["functions"]["f"]["launches"]
    assert [e.get("library", "kernel")[:6] for e in launches] == ["cublas", "kernel"]
    (choice,) = plan_of(out)["autotune"]["library_choices"]
    assert (choice["family"], choice["model"], choice["kept"]) == ("gemm", "own", "library")
    check_numbers(out, MATMUL)


def test_a_second_compile_times_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        stand_ins: None) -> None:
    first, _ = fusec_autotune(tmp_path, TWO_CONVS, capsys, name="first")
    assert len(FakeEventTimer.calls) == 2
    FakeEventTimer.calls.clear()
    second, _ = fusec_autotune(tmp_path, TWO_CONVS, capsys, name="second")
    assert FakeEventTimer.calls == []
    plan = plan_of(second)
    assert plan["functions"] == plan_of(first)["functions"]
    assert all(c["from_cache"] for c in plan["autotune"]["library_choices"])
    assert plan["autotune"]["device_timings"] == 0
    check_numbers(second, TWO_CONVS)


def _poison_times(entry: dict[str, Any]) -> None:
    entry["result"]["library_samples_us"] = [-1.0]


def _poison_model(entry: dict[str, Any]) -> None:
    entry["result"]["model"] = "library"


def _poison_family(entry: dict[str, Any]) -> None:
    entry["result"]["choice"] = "gemm"


def _poison_keys(entry: dict[str, Any]) -> None:
    entry["result"] = {"group": "g0", "fused": {}, "contest": "", "parts": []}


@pytest.mark.parametrize("poison", [_poison_times, _poison_model, _poison_family, _poison_keys])
def test_a_poisoned_entry_is_a_miss(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    fake_gpu: Path, stand_ins: None, poison: Any) -> None:
    fusec_autotune(tmp_path, TWO_CONVS, capsys, name="first")
    for path in choice_entries(fake_gpu):
        entry = json.loads(path.read_text(encoding="utf-8"))
        # make the library look fastest wherever the entry is believed
        entry["result"]["library_samples_us"] = [0.1]
        poison(entry)
        path.write_text(json.dumps(entry), encoding="utf-8")
    FakeEventTimer.calls.clear()
    out, err = fusec_autotune(tmp_path, TWO_CONVS, capsys, name="second")
    assert err.count("ignoring the tuning cache entry") == 2
    assert len(FakeEventTimer.calls) == 2  # both timed again
    launches = plan_of(out)["functions"]["f"]["launches"]
    assert sum("library" in e for e in launches) == 1
    check_numbers(out, TWO_CONVS)


def test_an_entry_of_another_group_is_a_miss(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            fake_gpu: Path) -> None:
    fusec_autotune(tmp_path, TWO_CONVS, capsys, name="first")
    a, b = choice_entries(fake_gpu)
    b.write_text(a.read_text(encoding="utf-8"), encoding="utf-8")  # foreign: another key
    FakeEventTimer.calls.clear()
    _, err = fusec_autotune(tmp_path, TWO_CONVS, capsys, name="second")
    assert "written for another group" in err
    assert len(FakeEventTimer.calls) == 1


@pytest.mark.parametrize("mode", ["fused", "library"])
def test_an_explicit_conv_mode_wins_over_tuning(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str],
                                                mode: str) -> None:
    # Regression: under --conv library the schedule tuner timed the cuDNN
    # call's group as if it were one of fusec's kernels.
    out, _ = fusec_autotune(tmp_path, TWO_CONVS, capsys, "--conv", mode)
    assert FakeEventTimer.calls == []
    plan = plan_of(out)
    launches = plan["functions"]["f"]["launches"]
    assert sum("library" in e for e in launches) == (2 if mode == "library" else 0)
    assert plan["autotune"]["library_choices"] == []


def test_without_a_gpu_the_model_s_choice_stays_with_a_remark(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    import fusec.runtime.device as device

    monkeypatch.setattr(device, "gpu_available", lambda: False)
    out, err = fusec_autotune(tmp_path, TWO_CONVS, capsys)
    assert err.count(NO_GPU_NOTE) == 1
    assert FakeEventTimer.calls == []
    report = (out / "report.md").read_text(encoding="utf-8")
    assert report.count("autotuning: no CUDA GPU: nothing to time; the model's choice "
                        "(own) kept") == 2
    assert not any("library" in e for e in plan_of(out)["functions"]["f"]["launches"])
    check_numbers(out, TWO_CONVS)


def test_without_cudnn_the_model_s_choice_stays_with_a_remark(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tile_and_promote, "cudnn_available", lambda: False)
    out, _ = fusec_autotune(tmp_path, TWO_CONVS, capsys)
    assert FakeEventTimer.calls == []
    report = (out / "report.md").read_text(encoding="utf-8")
    assert report.count("autotuning: cuDNN is not installed: nothing to time") == 2
    check_numbers(out, TWO_CONVS)


# A convolution whose input is computed in its group (a relu of a scaled
# input, evaluated where the kernel reads each tap): the library variant
# runs that prologue as a kernel of its own before the cuDNN call.
PROLOGUE_CONV = f"""
func.func @f(%x: tensor<1x8x6x6xf32>, %s: tensor<8x1x1xf32>, %w: tensor<5x8x3x3xf32>,
             %b: tensor<5x1x1xf32>) -> tensor<1x5x6x6xf32> {{
  %m = nn.mul %x, %s : (tensor<1x8x6x6xf32>, tensor<8x1x1xf32>) -> tensor<1x8x6x6xf32>
  %r = nn.relu %m : tensor<1x8x6x6xf32>
  %c = nn.conv2d %r, %w {{strides = [1, 1], pads = [1, 1, 1, 1], {ATTRS}}}
      : (tensor<1x8x6x6xf32>, tensor<5x8x3x3xf32>) -> tensor<1x5x6x6xf32>
  %y = nn.add %c, %b : (tensor<1x5x6x6xf32>, tensor<5x1x1xf32>) -> tensor<1x5x6x6xf32>
  func.return %y : tensor<1x5x6x6xf32>
}}
"""


@pytest.mark.parametrize(("times", "library"), [((2.0, 6.0), True), ((7.0, 6.0), False)])
def test_a_convolution_with_a_prologue_follows_the_timings(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], stand_ins: None,
        monkeypatch: pytest.MonkeyPatch, times: tuple[float, float], library: bool) -> None:
    monkeypatch.setattr(FakeEventTimer, "times", {8: times})
    out, _ = fusec_autotune(tmp_path, PROLOGUE_CONV, capsys)
    launches = plan_of(out)["functions"]["f"]["launches"]
    calls = [e for e in launches if "library" in e]
    own = [e for e in launches if "library" not in e]
    if library:  # the prologue's kernel, the cuDNN call, the epilogue's kernel
        assert [e.get("library", "kernel") for e in launches] == \
            ["kernel", "cudnn_conv_f32", "kernel"], launches
    else:  # one kernel: the prologue evaluated where the convolution reads it
        assert not calls and len(own) == 1, launches
    (choice,) = plan_of(out)["autotune"]["library_choices"]
    assert choice["kept"] == ("library" if library else "own")
    check_numbers(out, PROLOGUE_CONV)
