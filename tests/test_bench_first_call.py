"""bench/first_call.py's plumbing without a GPU: `--dry-run` lists every
measurement (a fresh process each, cold and warm sharing their cache
folders), bad arguments are errors, and importing it imports nothing heavy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fusec.bench import first_call


def test_dry_run_lists_each_measurement_in_a_process_of_its_own(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.md"
    assert first_call.main([str(out), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    runs = [line for line in lines if " -m fusec.bench.first_call --child " in line]
    assert len(runs) == 3 * 2 * 2
    for model in first_call.MODELS:
        for backend in first_call.BACKENDS:
            cold = next(r for r in runs if r.startswith(f"{model} {backend} cold:"))
            warm = next(r for r in runs if r.startswith(f"{model} {backend} warm:"))
            assert cold.split(": ", 1)[1] == warm.split(": ", 1)[1]  # same folders, new process
            assert "FUSEC_CACHE_DIR=" in cold and "TORCHINDUCTOR_CACHE_DIR=" in cold
            assert f"--child {model} {backend}" in cold
    folders = {r.split("FUSEC_CACHE_DIR=")[1].split()[0] for r in runs}
    assert len(folders) == 3 * 2  # fresh folders per model and backend
    assert lines[-1] == f"would write the table to {out}" and not out.exists()


def test_backends_and_phases_narrow_the_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [str(tmp_path / "t.md"), "--models", "gpt2", "--backends", "fusec",
            "--phases", "cold", "--dry-run"]
    assert first_call.main(args) == 0
    runs = [line for line in capsys.readouterr().out.splitlines() if " --child " in line]
    assert len(runs) == 1 and runs[0].startswith("gpt2 fusec cold:")


@pytest.mark.parametrize(("args", "message"), [
    (["--models", "gpt3"], "unknown model(s) gpt3"),
    ([], "name the markdown file"),
    (["--timeout", "0"], "--timeout must be > 0"),
    (["--backends", "xla"], "unknown backend or phase xla"),
    (["--phases", "hot"], "unknown backend or phase hot"),
    (["--warm-runs", "0"], "--warm-runs must be >= 1"),
])
def test_bad_arguments_are_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  args: list[str], message: str) -> None:
    out = [] if args == [] else [str(tmp_path / "t.md")]
    assert first_call.main([*out, *args, "--dry-run"]) == 2
    assert message in capsys.readouterr().err


def test_a_table_of_the_results() -> None:
    results = {("gpt2", "fusec", "cold"): {"seconds": 12.34, "launched": 60, "compiled": 9,
                                            "cached": 0},
               ("gpt2", "fusec", "warm"): {"seconds": 1.5, "launched": 60, "compiled": 0,
                                            "cached": 9},
               ("gpt2", "inductor", "cold"): {"seconds": 20.0},
               ("gpt2", "inductor", "warm"): {"error": "over 5 s"}}
    text = first_call.table(results, ["gpt2"])
    assert "| gpt2 | 12.3 s | 1.5 s | 20.0 s | error: over 5 s | 60 | 9 | 9 |" in text


def test_the_timeline_of_a_cold_call_comes_from_the_build_log(tmp_path: Path) -> None:
    log = tmp_path / "builds.log"
    log.write_text("cached k0 fused_0 100.100 100.100\n"
                   "built k1 fused_1 101.000 103.500\n"
                   "built k2 attention_2 101.200 106.000\n"
                   "built k3 garbled\n")
    got = first_call.timeline(log, begin=100.0, seconds=7.25)
    assert got.pop("builds") == [["fused_1", 1.0, 3.5], ["attention_2", 1.2, 6.0]]
    assert got == {"first_asked_s": 1.0, "last_built_s": 6.0, "after_builds_s": 1.25,
                   "longest_build_s": 4.8, "longest_kernel": "attention_2"}
    assert first_call.timeline(tmp_path / "none.log", 0.0, 1.0) == {}
    results = {("gpt2", "fusec", "cold"): {"seconds": 7.25, **got}}
    assert "| gpt2 | 1.0 s | 6.0 s | 1.2 s | 4.8 s (attention_2) |" in \
        first_call.timeline_table(results, ["gpt2"])
    assert first_call.timeline_table({}, ["gpt2"]) == ""


def test_the_stages_of_cold_and_warm_calls_and_their_builds_are_a_table() -> None:
    cold = {"seconds": 7.0, "builds": [["fused_1", 1.0, 3.5], ["attention_2", 1.2, 6.0]],
            "stages": {"backend": [0.5, 6.9], "forward": [0.9, 6.8],
                       "compile": [1.0, 2.0, 2.5, 4.0], "register-budget": [], "load": [4.1, 6.2]}}
    warm = {"seconds": 2.0, "stages": {"backend": [0.4, 1.9], "compile": [0.8, 1.1],
                                       "load": [1.2, 1.8]}}
    text = first_call.stages_table({("gpt2", "fusec", "cold"): cold,
                                    ("gpt2", "fusec", "warm"): warm}, ["gpt2"])
    assert "| model | call | backend | forward | compile | register-budget | load |" in text
    assert ("| gpt2 | cold | 0.5-6.9 s | 0.9-6.8 s | 1.0-4.0 s (2 calls) | - | 4.1-6.2 s | "
            "fused_1 1.0-3.5, attention_2 1.2-6.0 |") in text
    assert "| gpt2 | warm | 0.4-1.9 s | - | 0.8-1.1 s | - | 1.2-1.8 s | - |" in text
    assert first_call.stages_table({("gpt2", "fusec", "cold"): {"seconds": 1.0}}, ["gpt2"]) == ""


def test_several_warm_runs_each_in_a_process_of_their_own(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [str(tmp_path / "t.md"), "--models", "resnet50", "--backends", "fusec",
            "--warm-runs", "3", "--dry-run"]
    assert first_call.main(args) == 0
    runs = [line for line in capsys.readouterr().out.splitlines() if " --child " in line]
    assert [r.split(":")[0] for r in runs] == ["resnet50 fusec cold", "resnet50 fusec warm",
                                               "resnet50 fusec warm2", "resnet50 fusec warm3"]
    assert len({r.split(": ", 1)[1] for r in runs}) == 1  # the folders the cold run filled


def test_warm_samples_combine_into_their_median_with_every_sample() -> None:
    runs = [{"seconds": 3.4, "cached": 9}, {"seconds": 2.9, "cached": 9},
            {"seconds": 3.0, "cached": 9}]
    got = first_call.combine(runs)
    assert got == {"seconds": 3.0, "cached": 9, "samples": [3.4, 2.9, 3.0]}
    assert first_call.combine([{"seconds": 2.0}, {"seconds": 1.0}])["seconds"] == 1.0
    assert first_call.combine([{"seconds": 2.0}]) == {"seconds": 2.0}
    assert first_call.combine([{"seconds": 2.0}, {"error": "over 5 s"}]) == {"error": "over 5 s"}
    results = {("gpt2", "fusec", "warm"): got}
    assert "| gpt2 | - | 3.0 s (3.4, 2.9, 3.0) | - | - | - | - | 9 |" in \
        first_call.table(results, ["gpt2"])


def test_stages_are_timed_by_wrapping_their_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    module = types.ModuleType("stage_probe")

    class Owner:
        def call(self, x: int) -> int:
            return x + 1

    module.Owner = Owner  # type: ignore[attr-defined]
    module.double = lambda x: 2 * x  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "stage_probe", module)
    marks = first_call._mark_stages({"method": ("stage_probe", "Owner", "call"),
                                     "function": ("stage_probe", None, "double")})
    assert Owner().call(1) == 2 and module.double(3) == 6 and module.double(4) == 8
    assert len(marks["method"]) == 2 and len(marks["function"]) == 4
    start, end = marks["function"][:2]
    assert start <= end <= marks["function"][2]


def test_importing_it_imports_nothing_heavy() -> None:
    code = ("import sys, fusec.bench.first_call; "
            "print(sorted(m for m in ('torch', 'numba', 'transformers', 'torchvision', 'xdsl') "
            "if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert proc.stdout.strip() == "[]"


def test_fusec_is_handed_to_torch_compile_as_its_callable() -> None:
    """Not by the name "fusec": on a machine where the checkout is importable
    but not installed, Dynamo knows no backend of that name (every fusec row
    of the first GPU run failed with InvalidBackend)."""
    pytest.importorskip("torch")
    from fusec.importers.torch.backend import fusec_backend

    assert first_call.compile_backend("fusec") is fusec_backend
    assert first_call.compile_backend("inductor") == "inductor"


def test_profile_names_one_file_per_child(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`--profile DIR` hands each child the text file to write its profile to."""
    seen: list[str | None] = []

    def fake_run(cmd: list[str], env: dict[str, str], **_: object) -> object:
        seen.append(env.get(first_call.PROFILE_ENV))
        return subprocess.CompletedProcess(cmd, 0, first_call.RESULT_TAG + '{"seconds": 1.0}\n', "")

    monkeypatch.setattr(first_call.subprocess, "run", fake_run)
    run = first_call.plan(["gpt2"], tmp_path)[1]
    assert first_call.run_child(run, 10.0, tmp_path / "prof") == {"seconds": 1.0}
    assert first_call.run_child(run, 10.0) == {"seconds": 1.0}
    assert seen == [str(tmp_path / "prof" / "gpt2-fusec-warm.txt"), None]


def test_fusec_options_reach_only_fusec_children(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    args = [str(tmp_path / "t.md"), "--models", "gpt2", "--phases", "cold", "--dry-run",
            "--fusec-options", '{"ptxas_wait": 0}']
    assert first_call.main(args) == 0
    runs = [line for line in capsys.readouterr().out.splitlines() if " --child " in line]
    fusec_run = next(r for r in runs if r.startswith("gpt2 fusec cold:"))
    inductor_run = next(r for r in runs if r.startswith("gpt2 inductor cold:"))
    assert first_call.OPTIONS_ENV + "='{\"ptxas_wait\": 0}'" in fusec_run
    assert first_call.OPTIONS_ENV not in inductor_run
    seen: list[str | None] = []

    def fake_run(cmd: list[str], env: dict[str, str], **_: object) -> object:
        seen.append(env.get(first_call.OPTIONS_ENV))
        return subprocess.CompletedProcess(cmd, 0, first_call.RESULT_TAG + '{"seconds": 1.0}\n', "")

    monkeypatch.setattr(first_call.subprocess, "run", fake_run)
    fusec_cold, inductor_cold = (r for r in first_call.plan(["gpt2"], tmp_path)
                                 if r.phase == "cold")
    for run in (fusec_cold, inductor_cold):
        first_call.run_child(run, 10.0, None, {"ptxas_wait": 0})
    assert seen == ['{"ptxas_wait": 0}', None]


@pytest.mark.parametrize(("options", "message"), [
    ("{ptxas_wait: 0}", "--fusec-options is not JSON"),
    ("[0]", "--fusec-options must be a JSON object"),
])
def test_bad_fusec_options_are_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      options: str, message: str) -> None:
    assert first_call.main([str(tmp_path / "t.md"), "--fusec-options", options,
                            "--dry-run"]) == 2
    assert message in capsys.readouterr().err
