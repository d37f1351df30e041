"""A real model's first call: fusec against inductor, cold and warm (GPU).

    python -m fusec.bench.first_call bench/results/DATE-DEVICE-first-call.md
        [--models gpt2,resnet50,llama] [--backends fusec,inductor]
        [--phases cold,warm] [--warm-runs 1] [--timeout 1800] [--dry-run]

For each model (bench/real_models.py: random weights, seeded, eval mode,
fp32, CUDA; no key/value cache):
- `gpt2`: Hugging Face GPT-2 (`GPT2Config`, 6 layers), B4 S256;
- `resnet50`: torchvision's `resnet50(weights=None)`, B32 224x224;
- `llama`: a Llama-style decoder (`LlamaConfig`: 4 layers, hidden 1024,
  grouped-query attention with 16 query and 4 key/value heads), B2 S256;

four measurements, each in a process of its own (`--child`): the time of
`torch.compile(model, backend=B)(x)`'s first call (compile included, up to
`torch.cuda.synchronize()`), for B = fusec and inductor, "cold" with fresh
empty cache folders (`FUSEC_CACHE_DIR`; `TORCHINDUCTOR_CACHE_DIR` and
`TRITON_CACHE_DIR`) and "warm" in a new process reusing the folders the cold
one filled. fusec's rows also give the kernels launched per call, the
distinct kernels compiled in that process and those that came from the
cache (counted through `codegen/build_pool.py`'s hook). The table goes to
the markdown file named on the command line (with date, device and commit,
$FUSEC_COMMIT or git's) and to stdout.

fusec's cold rows also say where the call's seconds went, from the build
log (`$FUSEC_BUILD_LOG`, the wall-clock time each kernel was asked for and
was ready): the seconds before the first kernel was asked for (Dynamo,
aot_autograd, the partitioner and fusec's front end up to its first
kernel), until the last build was done, the longest build and its kernel,
and the seconds after it (the rest of the front end, loading the kernels,
the call itself); a third table says when each of fusec's stages ran in
each cold and warm call (the backend called by Dynamo, its forward compiler
called by aot_autograd, `fusec.compile`, its `register-budget` pass, the
kernels loaded) and lists every kernel built, with when it was asked for and
ready.

`--warm-runs N` measures each warm call N times, each in a new process on
the same filled folders: the table gives the median and every sample (a
warm call is a few seconds, and one sample on a busy machine says little).

`--fusec-options JSON` hands fusec's children the backend's options (a JSON
object, e.g. `'{"ptxas_wait": 3}'`; named in the table's header), so that
two settings can be compared on the same machine.

`--profile DIR` runs each fusec child under cProfile and writes the 40 calls
of largest cumulative time to `DIR/MODEL-fusec-PHASE.txt` (where a first call's
seconds go: Dynamo, aot_autograd, fusec's partitioner and compile, kernel
loading).

`--dry-run` checks the arguments and prints the commands it would run,
without torch or a GPU (the module imports nothing heavy until a child runs).
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import functools
import io
import json
import os
import pstats
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fusec.bench.backend_options import parse_options
from fusec.bench.commit_id import commit

MODELS = ("gpt2", "resnet50", "llama")
BACKENDS = ("fusec", "inductor")
PHASES = ("cold", "warm")
RESULT_TAG = "FIRST_CALL_RESULT "
PROFILE_ENV = "FUSEC_FIRST_CALL_PROFILE"
"""Set by the parent for a child to profile: the text file to write."""
OPTIONS_ENV = "FUSEC_FIRST_CALL_OPTIONS"
"""Set by the parent for a fusec child: the backend's options, as JSON."""
PROFILE_LINES = 40


@dataclass(frozen=True)
class Run:
    """One measurement: a model, a backend, cold or warm, and its cache root."""

    model: str
    backend: str
    phase: str
    cache_root: Path
    sample: int = 0
    """Which of the phase's runs this is (several warm runs share the folders)."""

    @property
    def label(self) -> str:
        """`phase`, numbered from the second sample on (`warm`, `warm2`, ...)."""
        return self.phase if self.sample == 0 else f"{self.phase}{self.sample + 1}"

    def env(self) -> dict[str, str]:
        """The cache folders of this run (the same for cold and warm)."""
        root = self.cache_root
        return {"FUSEC_CACHE_DIR": str(root / "fusec"),
                "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),
                "TRITON_CACHE_DIR": str(root / "triton")}

    def command(self) -> list[str]:
        """The child process's command line."""
        return [sys.executable, "-m", "fusec.bench.first_call", "--child", self.model,
                self.backend]


def plan(models: list[str], root: Path, backends: tuple[str, ...] = BACKENDS,
         phases: tuple[str, ...] = PHASES, warm_runs: int = 1) -> list[Run]:
    """Every run, cold before warm (`warm_runs` of those), each (model,
    backend) with its own folders."""
    return [Run(m, b, phase, root / f"{m}-{b}", k)
            for m in models for b in backends for phase in phases
            for k in range(warm_runs if phase == "warm" else 1)]


def combine(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """One phase's result from its runs: the run of median time (the lower
    middle of an even count), with every run's seconds as `samples` when
    there were several; a run that failed is the result if any did."""
    if failed := [r for r in samples if "seconds" not in r]:
        return failed[0]
    ordered = sorted(samples, key=lambda r: r["seconds"])
    out = dict(ordered[(len(ordered) - 1) // 2])
    if len(samples) > 1:
        out["samples"] = [r["seconds"] for r in samples]
    return out


# --- the child: one first call ---------------------------------------------------------------


def build_model(name: str) -> tuple[Any, tuple[Any, ...]]:
    """The model (eval, on CUDA) and its inputs, as bench/real_models.py builds them."""
    from fusec.bench.real_models import build

    case = build(name)
    return case.module.cuda(), tuple(t.cuda() for t in case.inputs)


def compile_backend(backend: str, options: dict[str, Any] | None = None) -> Any:
    """What `torch.compile` is handed for `backend`: fusec's backend as the
    callable itself (its entry point exists only where fusec is installed,
    not where the checkout is merely importable), with `options` if any,
    inductor by name."""
    if backend == "fusec":
        from fusec.importers.torch.backend import fusec_backend

        return functools.partial(fusec_backend, options=options) if options else fusec_backend
    return backend


def first_call(model_name: str, backend: str) -> dict[str, Any]:
    """Time one compiled first call in this (fresh) process."""
    import torch

    counts = {"built": 0, "cached": 0}
    log = Path(tempfile.mkdtemp(prefix="fusec-build-log-")) / "builds.log"
    if backend == "fusec":
        from fusec.codegen.build_pool import BUILD_LOG_ENV, add_listener

        os.environ[BUILD_LOG_ENV] = str(log)
        add_listener(lambda event, _key, _label: counts.__setitem__(event, counts[event] + 1))
    marks = _mark_stages(STAGES) if backend == "fusec" else {}
    model, inputs = build_model(model_name)
    options = json.loads(os.environ.get(OPTIONS_ENV) or "{}") if backend == "fusec" else {}
    compiled = torch.compile(model, backend=compile_backend(backend, options))
    torch.cuda.synchronize()
    profile_to = os.environ.get(PROFILE_ENV) if backend == "fusec" else None
    profiler = cProfile.Profile() if profile_to else None
    with torch.no_grad():
        wall_begin = time.time()
        begin = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        compiled(*inputs)
        torch.cuda.synchronize()
        if profiler is not None:
            profiler.disable()
        seconds = time.perf_counter() - begin
    if profiler is not None and profile_to:
        _write_profile(profiler, Path(profile_to), seconds)
    out: dict[str, Any] = {"seconds": seconds}
    if backend == "fusec":
        from fusec.importers.torch.backend import reports

        out.update(launched=sum(r.launches for r in reports()), compiled=counts["built"],
                   cached=counts["cached"])
        out.update(timeline(log, wall_begin, seconds))
        out["stages"] = {name: [round(t - wall_begin, 2) for t in spans]
                         for name, spans in marks.items()}
    return out


STAGES = {
    "backend": ("fusec.importers.torch.backend", "Backend", "__call__"),
    "forward": ("fusec.importers.torch.backend", "_ForwardCompiler", "__call__"),
    "compile": ("fusec.compiler.python_api", None, "compile"),
    "register-budget": ("fusec.passes.register_budget", "RegisterBudgetPass", "apply"),
    "load": ("fusec.runtime.kernel_loader", None, "compile_parallel"),
}
"""fusec's stages in a first call: Dynamo hands the graph to the backend,
aot_autograd to its forward compiler, which compiles each partition
(`fusec.compile`, whose `register-budget` asks for the first kernel builds),
and the first call waits for the kernels (`load`)."""


def _mark_stages(stages: dict[str, tuple[str, str | None, str]]) -> dict[str, list[float]]:
    """Wrap each stage's function so that every call adds its wall-clock
    start and end to the returned lists (this child's only instrument)."""
    import functools
    import importlib

    marks: dict[str, list[float]] = {}
    for name, (module_name, owner_name, attr) in stages.items():
        owner: Any = importlib.import_module(module_name)
        if owner_name is not None:
            owner = getattr(owner, owner_name)
        inner = getattr(owner, attr)
        spans = marks.setdefault(name, [])

        def timed(*args: Any, _inner: Any = inner, _spans: list[float] = spans,
                  **kwargs: Any) -> Any:
            start = time.time()
            try:
                return _inner(*args, **kwargs)
            finally:
                _spans.extend((start, time.time()))

        setattr(owner, attr, functools.wraps(inner)(timed))
    return marks


def timeline(log: Path, begin: float, seconds: float) -> dict[str, Any]:
    """Where a call's seconds went, from the build log's lines `EVENT KEY
    KERNEL ASKED DONE` of builds (cache hits are not builds): seconds from
    the call's start to the first kernel asked for and to the last build
    done, and the longest build; {} when nothing was built."""
    spans: list[tuple[float, float, str]] = []
    try:
        lines = log.read_text(encoding="utf-8").splitlines()
    except OSError:
        return {}
    for line in lines:
        parts = line.split()
        if len(parts) == 5 and parts[0] == "built":
            try:
                spans.append((float(parts[3]), float(parts[4]), parts[2]))
            except ValueError:
                continue
    if not spans:
        return {}
    longest = max(spans, key=lambda s: s[1] - s[0])
    last_done = max(s[1] for s in spans) - begin
    return {"builds": [[label, round(a - begin, 2), round(d - begin, 2)]
                       for a, d, label in sorted(spans)],
            "first_asked_s": round(min(s[0] for s in spans) - begin, 2),
            "last_built_s": round(last_done, 2),
            "after_builds_s": round(seconds - last_done, 2),
            "longest_build_s": round(longest[1] - longest[0], 2),
            "longest_kernel": longest[2]}


def _write_profile(profiler: cProfile.Profile, path: Path, seconds: float) -> None:
    """The calls of largest cumulative time, as text."""
    text = io.StringIO()
    text.write(f"first call: {seconds:.2f} s\n")
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(PROFILE_LINES)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.getvalue())


# --- the parent -----------------------------------------------------------------------------


def run_child(run: Run, timeout_s: float, profile_dir: Path | None = None,
              options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The child's result, or {"error": ...}; profiled into `profile_dir` if
    given; a fusec child gets the backend's `options`."""
    env = {**os.environ, **run.env()}
    if options and run.backend == "fusec":
        env[OPTIONS_ENV] = json.dumps(options)
    if profile_dir is not None:
        env[PROFILE_ENV] = str(profile_dir / f"{run.model}-{run.backend}-{run.label}.txt")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    try:
        proc = subprocess.run(run.command(), env=env, capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout_s:g} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG):])
    tail = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
    return {"error": tail[:200]}


def table(results: dict[tuple[str, str, str], dict[str, Any]], models: list[str]) -> str:
    """The markdown table: one row per model, fusec and inductor side by side."""
    def sec(r: dict[str, Any] | None) -> str:
        if r is None:
            return "-"
        if "seconds" not in r:
            return f"error: {r.get('error')}"
        every = r.get("samples", [])
        return f"{r['seconds']:.1f} s" + (
            f" ({', '.join(f'{t:.1f}' for t in every)})" if every else "")

    def num(r: dict[str, Any] | None, key: str) -> str:
        return str(r[key]) if r and key in r else "-"

    lines = ["| model | fusec cold | fusec warm | inductor cold | inductor warm | launched | "
             "compiled (cold) | cache hits (warm) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for m in models:
        fc, fw = results.get((m, "fusec", "cold")), results.get((m, "fusec", "warm"))
        ic, iw = results.get((m, "inductor", "cold")), results.get((m, "inductor", "warm"))
        lines.append(f"| {m} | {sec(fc)} | {sec(fw)} | {sec(ic)} | {sec(iw)} | "
                     f"{num(fc, 'launched')} | {num(fc, 'compiled')} | {num(fw, 'cached')} |")
    return "\n".join(lines) + "\n"


def timeline_table(results: dict[tuple[str, str, str], dict[str, Any]],
                   models: list[str]) -> str:
    """Where each fusec cold call went ("" when no row has a timeline)."""
    rows = [(m, r) for m in models
            if (r := results.get((m, "fusec", "cold"))) and "last_built_s" in r]
    if not rows:
        return ""
    lines = ["| model (fusec cold) | first kernel asked | last build done | after the builds | "
             "longest build |",
             "|---|---:|---:|---:|---|"]
    for m, r in rows:
        lines.append(f"| {m} | {r['first_asked_s']:.1f} s | {r['last_built_s']:.1f} s | "
                     f"{r['after_builds_s']:.1f} s | {r['longest_build_s']:.1f} s "
                     f"({r['longest_kernel']}) |")
    return "\n".join(lines) + "\n"


def _span(spans: list[float]) -> str:
    """A stage's calls (flat start, end pairs): from the first start to the
    last end, with the count where it ran more than once; "-" if never."""
    if len(spans) < 2:
        return "-"
    calls = len(spans) // 2
    return f"{spans[0]:.1f}-{max(spans[1::2]):.1f} s" + (f" ({calls} calls)" if calls > 1 else "")


def stages_table(results: dict[tuple[str, str, str], dict[str, Any]],
                 models: list[str]) -> str:
    """When each of fusec's stages ran in each cold and warm call (a warm
    phase's median run), and every kernel built with when it was asked for
    and ready ("" when no row has stages): what to read when a first call is
    late, before profiling it."""
    rows = [(m, phase, r) for m in models for phase in PHASES
            if (r := results.get((m, "fusec", phase))) and r.get("stages")]
    if not rows:
        return ""
    lines = ["| model | call | " + " | ".join(STAGES) + " | builds (asked-ready) |",
             "|---|---|" + "---:|" * len(STAGES) + "---|"]
    for m, phase, r in rows:
        stages = [_span(r["stages"].get(name, [])) for name in STAGES]
        builds = ", ".join(f"{k} {a:.1f}-{d:.1f}" for k, a, d in r.get("builds", [])) or "-"
        lines.append(f"| {m} | {phase} | " + " | ".join(stages) + f" | {builds} |")
    return "\n".join(lines) + "\n"


def _device() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, check=False, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.stdout.strip() else "unknown GPU"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown GPU"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (`--child MODEL BACKEND` runs one measurement)."""
    ap = argparse.ArgumentParser(prog="python -m fusec.bench.first_call",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("output", nargs="?", help="the markdown file to write")
    ap.add_argument("--models", default=",".join(MODELS),
                    help=f"comma-separated, of {', '.join(MODELS)}")
    ap.add_argument("--backends", default=",".join(BACKENDS),
                    help=f"comma-separated, of {', '.join(BACKENDS)}")
    ap.add_argument("--phases", default=",".join(PHASES),
                    help="comma-separated, of cold, warm (warm reuses what cold filled)")
    ap.add_argument("--warm-runs", type=int, default=1, metavar="N",
                    help="warm calls per model and backend, each in a new process (median "
                    "and every sample in the table)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per measurement")
    ap.add_argument("--profile", metavar="DIR", type=Path,
                    help="profile each fusec child; text summaries go to DIR")
    ap.add_argument("--fusec-options", metavar="JSON", default="",
                    help='the fusec backend\'s options, a JSON object (e.g. \'{"ptxas_wait": 3}\')')
    ap.add_argument("--dry-run", action="store_true", help="print the runs, run nothing")
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "BACKEND"), help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run (or, with --dry-run, list) every measurement and write the table."""
    args = parse_args(argv)
    if args.child:
        model, backend = args.child
        print(RESULT_TAG + json.dumps(first_call(model, backend)), flush=True)
        return 0
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        print(f"error: unknown model(s) {', '.join(unknown) or '(none)'}; "
              f"expected some of: {', '.join(MODELS)}", file=sys.stderr)
        return 2
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    phases = tuple(p.strip() for p in args.phases.split(",") if p.strip())
    wrong = [b for b in backends if b not in BACKENDS] + [p for p in phases if p not in PHASES]
    if wrong or not backends or not phases:
        print(f"error: unknown backend or phase {', '.join(wrong) or '(none)'}; backends: "
              f"{', '.join(BACKENDS)}; phases: {', '.join(PHASES)}", file=sys.stderr)
        return 2
    if not args.output:
        print("error: name the markdown file to write", file=sys.stderr)
        return 2
    if args.timeout <= 0:
        print("error: --timeout must be > 0", file=sys.stderr)
        return 2
    if args.warm_runs < 1:
        print("error: --warm-runs must be >= 1", file=sys.stderr)
        return 2
    try:
        options = parse_options(args.fusec_options)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    output = Path(args.output)
    if not output.parent.is_dir():
        print(f"error: cannot write '{output}': no folder '{output.parent}'", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="fusec-first-call-"))
    runs = plan(models, root, backends, phases, args.warm_runs)
    if args.dry_run:
        for run in runs:
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in run.env().items())
            if options and run.backend == "fusec":
                env += f" {OPTIONS_ENV}={shlex.quote(json.dumps(options))}"
            print(f"{run.model} {run.backend} {run.label}: {env} "
                  f"{shlex.join(run.command())}")
        print(f"would write the table to {output}")
        os.rmdir(root)
        return 0
    samples: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for run in runs:
        got = run_child(run, args.timeout, args.profile, options)
        samples.setdefault((run.model, run.backend, run.phase), []).append(got)
        print(f"{run.model} {run.backend} {run.label}: {got}", flush=True)
    results = {key: combine(runs_of) for key, runs_of in samples.items()}
    when = datetime.date.today().isoformat()
    text = f"# First call, cold and warm ({when}, {_device()}, commit {commit()})\n\n"
    if options:
        text += f"fusec backend options: `{json.dumps(options)}`\n\n"
    text += table(results, models)
    if steps := timeline_table(results, models):
        text += f"\nWhere fusec's cold first call went (seconds from the call's start):\n\n{steps}"
    if stages := stages_table(results, models):
        text += f"\nfusec's stages in each first call (seconds from its start):\n\n{stages}"
    output.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
