"""Where a warm first call's time goes, on the CPU (numba's CUDA simulator).

    python -m fusec.bench.warm_call [--models gpt2,llama] [--profile DIR] [--keep DIR]

"Warm" is the first call of `torch.compile(model, backend=fusec_backend)(x)`
in a new process whose cache folder (`FUSEC_CACHE_DIR`: the kernel cache and
the compiled-program cache) an earlier process filled; "cold" is that earlier
process, with an empty folder. Each runs in a process of its own (`--child`).
The cost of the compile path grows with the number of graph nodes, not with
tensor sizes, so the models are small versions of bench/first_call.py's
(random weights, seeded, eval mode, fp32, CPU tensors):

- `gpt2`: Hugging Face `GPT2Model`, 6 layers, D32, 2 heads, vocabulary 128, B1 S8;
- `llama`: `LlamaModel`, 4 layers, hidden 32, 4 query / 2 key-value heads
  (grouped-query), intermediate 64, vocabulary 128, B1 S8.

Each child times, through wrappers around the functions that do the work
(nothing in fusec changes for it), the parts of its first call:

| column | what |
|---|---|
| total | the whole first call (everything below) |
| dynamo | Dynamo's trace of the Python code (total less everything below) |
| aot | `aot_autograd`: its trace with fusec's decompositions, and its wrappers |
| cached | a graph rebuilt from the trace cache (its `fusec.compile`s apart) |
| scan | every node translated once on trial (`partition.scan_support`) |
| partition | `CapabilityBasedPartitioner` (`partition.partition`) |
| translate | each partition to `nn` text (`translate.translate_graph`) |
| compile | `fusec.compile` of each partition (hits of the compiled-program cache when warm) |
| load | each partition's executor: kernels.py loaded, dispatchers found |
| run | the simulated kernels and PyTorch's glue (the simulator's cost: no GPU) |

and counts: `traced` (graphs aot_autograd traced), `reused` (graphs rebuilt
from the trace cache), `partitions` (translated), `compiles` (fusec.compile
calls) and `hits` (those served by the compiled-program cache).
`--profile DIR` also writes a cProfile of each child's first call to
`DIR/MODEL-PHASE.prof` (`python -m pstats`). `--keep DIR` keeps the cache
folders there (a fresh temporary folder otherwise). The table goes to stdout.

The GPU half of a warm call (loading the cached cubins, CUDA-graph capture) is
not here: bench/first_call.py times the whole call on a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MODELS = ("gpt2", "llama")
PHASES = ("cold", "warm")
PARTS = ("total", "dynamo", "aot", "cached", "scan", "partition", "translate", "compile",
         "load", "run")
COUNTS = ("traced", "reused", "partitions", "compiles", "hits")
RESULT_TAG = "WARM_CALL_RESULT "


def build(name: str) -> tuple[Any, tuple[Any, ...]]:
    """The model (eval mode) and its inputs."""
    import torch

    torch.manual_seed(0)
    if name == "gpt2":
        from transformers import GPT2Config, GPT2Model

        config = GPT2Config(n_layer=6, n_embd=32, n_head=2, vocab_size=128, n_positions=64,
                            use_cache=False)
        model: Any = GPT2Model(config)
    else:
        from transformers import LlamaConfig, LlamaModel

        config = LlamaConfig(num_hidden_layers=4, hidden_size=32, intermediate_size=64,
                             num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                             max_position_embeddings=64, use_cache=False)
        model = LlamaModel(config)
    return model.eval(), (torch.randint(0, 128, (1, 8)),)


class Clock:
    """Seconds per part, summed over the calls of the wrapped functions."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PARTS, 0.0)
        self.counts = dict.fromkeys(COUNTS, 0)

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        """Add the time of the block to `name`."""
        begin = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - begin

    def wrap(self, owner: Any, attr: str, name: str,
             count: str | None = None) -> None:
        """Time every call of `owner.attr` as part `name` (and count it)."""
        original = getattr(owner, attr)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if count is not None:
                self.counts[count] += 1
            with self.part(name):
                return original(*args, **kwargs)

        setattr(owner, attr, timed)


def instrument(clock: Clock) -> None:
    """Wrap the functions each part is spent in."""
    from fusec.importers.torch import backend, partition
    from fusec.runtime import executor

    clock.wrap(backend.Backend, "__call__", "backend")
    clock.wrap(backend._ForwardCompiler, "__call__", "forward", "traced")
    clock.wrap(backend, "scan_support", "scan")
    clock.wrap(backend, "partition", "partition")
    clock.wrap(partition, "translate_node", "scan_translate")
    clock.wrap(backend, "translate_graph", "translate", "partitions")
    clock.wrap(executor.Executor, "__init__", "load")
    clock.wrap(backend.FusecPartition, "forward", "fusec_run")
    clock.wrap(backend._Recorded, "__call__", "call")
    _wrap_cached(clock, backend.Backend)
    from fusec.importers.torch import trace_cache

    trace_cache.add_listener(lambda event, _detail: clock.counts.__setitem__(
        "reused", clock.counts["reused"] + (event == "hit")))
    _wrap_compile(clock)


def _wrap_cached(clock: Clock, owner: Any) -> None:
    """Time the trace cache's rebuild, apart from the fusec.compile calls in it."""
    original = owner._cached

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        before = clock.seconds["compile"]
        with clock.part("cached"):
            out = original(*args, **kwargs)
        clock.seconds["cached_compile"] += clock.seconds["compile"] - before
        return out

    owner._cached = timed


def _wrap_compile(clock: Clock) -> None:
    """Time `fusec.compile` as the backend calls it; count its calls and the
    compiled-program cache's hits."""
    from fusec.compiler import python_api
    from fusec.compiler.program_cache import ProgramStore

    clock.wrap(python_api, "compile", "compile", "compiles")
    load = ProgramStore.load

    @functools.wraps(load)
    def counted(self: ProgramStore, key: str) -> Any:
        hit = load(self, key)
        clock.counts["hits"] += hit is not None
        return hit

    ProgramStore.load = counted  # type: ignore[method-assign]


def first_call(model_name: str, profile: Path | None, phase: str) -> dict[str, Any]:
    """Time one compiled first call in this (fresh) process."""
    import cProfile

    import torch

    from fusec.importers.torch.backend import fusec_backend

    model, inputs = build(model_name)
    clock = Clock()
    for extra in ("backend", "forward", "scan_translate", "fusec_run", "call", "cached_compile"):
        clock.seconds[extra] = 0.0
    instrument(clock)
    compiled = torch.compile(model, backend=fusec_backend)
    profiler = cProfile.Profile() if profile is not None else None
    with torch.no_grad():
        if profiler is not None:
            profiler.enable()
        with clock.part("total"):
            compiled(*inputs)
        if profiler is not None:
            profiler.disable()
    if profiler is not None and profile is not None:
        profile.mkdir(parents=True, exist_ok=True)
        profiler.dump_stats(str(profile / f"{model_name}-{phase}.prof"))
    return summarize(clock)


def summarize(clock: Clock) -> dict[str, Any]:
    """The parts (seconds) and counts of one child, from its clock."""
    s = clock.seconds
    s["cached"] -= s["cached_compile"]
    s["aot"] = s["backend"] - s["forward"] - s["cached"] - s["cached_compile"]
    s["run"] = s["call"] - s["load"]
    s["dynamo"] = s["total"] - s["backend"] - s["call"]
    out: dict[str, Any] = {k: round(s[k], 3) for k in PARTS}
    out.update(clock.counts)
    return out


def run_child(model: str, phase: str, cache: Path, profile: Path | None,
              timeout_s: float) -> dict[str, Any]:
    """The child's result, or {"error": ...}."""
    env = {**os.environ, "FUSEC_CACHE_DIR": str(cache)}
    command = [sys.executable, "-m", "fusec.bench.warm_call", "--child", model, phase]
    if profile is not None:
        command += ["--profile", str(profile)]
    try:
        proc = subprocess.run(command, env=env, capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout_s:g} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            result: dict[str, Any] = json.loads(line[len(RESULT_TAG):])
            return result
    tail = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
    return {"error": tail[:300]}


def table(results: dict[tuple[str, str], dict[str, Any]]) -> str:
    """One row per model and phase: seconds per part, then the counts."""
    lines = ["| model | phase | " + " | ".join(PARTS) + " | " + " | ".join(COUNTS) + " |",
             "|---|---|" + "---:|" * (len(PARTS) + len(COUNTS))]
    for (model, phase), r in results.items():
        if "error" in r:
            lines.append(f"| {model} | {phase} | error: {r['error']} |")
            continue
        cells = [f"{r[p]:.2f}" for p in PARTS] + [str(r[c]) for c in COUNTS]
        lines.append(f"| {model} | {phase} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (`--child MODEL PHASE` runs one measurement)."""
    ap = argparse.ArgumentParser(prog="python -m fusec.bench.warm_call",
                                 description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS),
                    help=f"comma-separated, of {', '.join(MODELS)}")
    ap.add_argument("--profile", type=Path, help="write a cProfile per child to this folder")
    ap.add_argument("--keep", type=Path,
                    help="the cache folders' root (default: a new temporary one)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per child")
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "PHASE"), help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run a cold and a warm child per model and print the table."""
    args = parse_args(argv)
    if args.child:
        model, phase = args.child
        print(RESULT_TAG + json.dumps(first_call(model, args.profile, phase)), flush=True)
        return 0
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        print(f"error: unknown model(s) {', '.join(unknown) or '(none)'}; "
              f"expected some of: {', '.join(MODELS)}", file=sys.stderr)
        return 2
    root = args.keep or Path(tempfile.mkdtemp(prefix="fusec-warm-call-"))
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for model in models:
        cache = root / model
        for phase in PHASES:
            results[(model, phase)] = run_child(model, phase, cache, args.profile, args.timeout)
            print(f"{model} {phase}: {results[(model, phase)]}", file=sys.stderr, flush=True)
    print(table(results))
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
