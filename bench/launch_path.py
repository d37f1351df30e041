"""The call path on small inputs: `model(x)` per call with and without CUDA
graphs, beside torch eager, torch.compile and torch.compile's CUDA graphs.

    python bench/launch_path.py [--iters 200] [--repeat 7] [--no-compile] [--mobilenet]

Programs (issue 13): the 16-op elementwise chain at 4,096 elements and
softmax at 64x1024 (bench/models' chain16 and softmax with their shapes
replaced), and the GPT-2 block at B1 S64 D256 with 4 heads
(bench/models/launch_path/gpt2_block_small.mlir), the block also with
`gemm="library"` (cuBLAS captured in the graph). Each call is timed on the
host clock, as a caller sees it: `iters` calls then one synchronisation,
median over `repeat` runs, after a warm-up of `WARMUP_S` seconds of calls
(GPU clocks up, caches and allocators warm, whatever ran before). Inputs:
torch CUDA tensors (read in place by a graph captured for their
addresses; results written in place into fresh tensors), CuPy arrays, and
NumPy arrays (copied in and out through the static graph). Also measured:
the replay of a captured 20-kernel graph (a 20-op chain with fusion off)
divided by its 20 launches.

`--mobilenet` also exports MobileNetV2 to ONNX (bench/onnx_models.py),
imports it, and times `fusec.compile` + the first call in two fresh
processes sharing one new kernel cache: cold (empty cache) and warm.

Tables go to stdout and are appended, with date, device and commit
($FUSEC_COMMIT), to bench/results/DATE-DEVICE.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run_gpu import _check, _header, _write  # noqa: E402

MODELS = HERE / "models"
REPLAY_KERNELS = 20
WARMUP_S = 0.2


def programs() -> dict[str, tuple[str, str, str]]:
    """name -> (model text, peer name in bench/peers.py, fusec --gemm)."""
    chain = (MODELS / "chain16.mlir").read_text().replace("268435456", "4096")
    softmax = (MODELS / "softmax.mlir").read_text().replace("16384x4096", "64x1024") \
        .replace("16384x1", "64x1")
    gpt2 = (MODELS / "launch_path" / "gpt2_block_small.mlir").read_text()
    return {"chain16 4096": (chain, "chain16", "auto"),
            "softmax 64x1024": (softmax, "softmax", "auto"),
            "gpt2 block B1 S64 D256": (gpt2, "gpt2_block", "auto"),
            "gpt2 block B1 S64 D256, gemm=library": (gpt2, "gpt2_block", "library")}


def chain_text(ops: int, n: int = 4096) -> str:
    """An elementwise chain of `ops` ops on `n` elements (one launch per op
    with fusion off)."""
    t = f"tensor<{n}xf32>"
    lines = [f"func.func @chain{ops}(%x: {t}) -> {t} {{", "  %c = nn.constant dense<1.001> : "
             "tensor<f32>"]
    prev = "%x"
    for i in range(ops):
        op = "nn.mul" if i % 2 == 0 else "nn.add"
        lines.append(f"  %{i} = {op} {prev}, %c : ({t}, tensor<f32>) -> {t}")
        prev = f"%{i}"
    return "\n".join([*lines, f"  func.return {prev} : {t}", "}", ""])


def host_time_us(torch: Any, fn: Any, iters: int, repeat: int) -> float:
    """Median microseconds per call on the host clock (`iters` calls, then
    one synchronisation), after `WARMUP_S` seconds of calls."""
    end = time.perf_counter() + WARMUP_S
    while time.perf_counter() < end:
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) / iters * 1e6)
    return statistics.median(samples)


def measure_program(name: str, text: str, peer: Any, gemm: str, fusec: Any, torch: Any,
                    args: argparse.Namespace) -> list[str]:
    """One program's table lines."""
    graphs = fusec.compile(text, device="gpu", gemm=gemm)
    plain = fusec.compile(text, device="gpu", gemm=gemm, graphs=False)
    gen = torch.Generator(device="cuda").manual_seed(0)
    fp = graphs.signature
    inputs = [torch.randn(fp.values[v].shape, device="cuda", generator=gen) for v in fp.inputs]
    ref = peer(*inputs)
    status = [_check(torch, m(*inputs), ref) for m in (graphs, plain, graphs)]
    assert graphs.executor.graph is not None, "no graph was captured"
    ex = plain.executor
    outs, _ = ex.launch(inputs)
    host = [t.cpu().numpy() for t in inputs]
    import cupy

    cp_in = [cupy.asarray(h) for h in host]
    it, rep = args.iters, args.repeat
    times = {
        "fusec model(x), graphs, torch CUDA in place": host_time_us(
            torch, lambda: graphs(*inputs), it, rep),
        "fusec model(x), graphs, CuPy in place": host_time_us(
            torch, lambda: graphs(*cp_in), it, rep),
        "fusec model(x), graphs, NumPy in and out (copies)": host_time_us(
            torch, lambda: graphs(*host), it, rep),
        "fusec model(x), no graphs": host_time_us(torch, lambda: plain(*inputs), it, rep),
        "fusec executor.launch (no graphs)": host_time_us(
            torch, lambda: ex.launch(inputs, outs), it, rep),
    }
    if gemm == "auto":  # a variant of a program above: its torch rows are those
        times["torch eager"] = host_time_us(torch, lambda: peer(*inputs), it, rep)
    if not args.no_compile and gemm == "auto":
        for label, mode in (("torch.compile", None), ("torch.compile reduce-overhead",
                                                       "reduce-overhead")):
            compiled = torch.compile(peer, mode=mode) if mode else torch.compile(peer)
            times[label] = host_time_us(torch, lambda c=compiled: c(*inputs), it, rep)
    lines = [f"## launch_path: {name} ({graphs.launches} launch(es); graphs {status[0]}, "
             f"replayed {status[2]}, no graphs {status[1]} against torch eager)", "",
             "| variant | µs per call |", "|---|---|"]
    lines += [f"| {k} | {v:.1f} |" for k, v in times.items()]
    return [*lines, "", replay_breakdown(graphs, inputs, torch, args), ""]


def replay_breakdown(model: Any, inputs: list[Any], torch: Any, args: argparse.Namespace) -> str:
    """Host µs per call of each part of a replayed `model(x)` on torch CUDA
    tensors (graph captured for their addresses): where the time goes
    beyond the graph itself; and how many graphs the runs captured."""
    runner = model.executor.graph
    it, rep = args.iters, args.repeat
    model(*inputs)
    key = next(reversed(runner.cache.entries))  # the graph of the last call
    entry = runner.cache.entries[key]
    fed = [f(a) for f, a in zip(runner.feeds, inputs, strict=True)]
    sink = runner._sinks[fed[0][0]]
    stream, _ = sink.stream()
    # Timed alone, the graph rewrites the last call's (dropped) result block,
    # which torch's caching allocator still holds: no other array is live there.
    parts = {
        "feed inputs": lambda: [f(a) for f, a in zip(runner.feeds, inputs, strict=True)],
        "read stream": sink.stream,
        "allocate outputs": sink.fresh,
        "graph look-up": lambda: runner.cache.get(key),
        "graph.launch": lambda: entry.graph.launch(stream),
        "model(x) in all": lambda: model(*inputs),
    }
    cells = [f"{k} {host_time_us(torch, fn, it, rep):.1f}" for k, fn in parts.items()]
    return ("Replay breakdown (host µs per call): " + ", ".join(cells)
            + f"; copies per call {len(entry.copy_in)} in, "
            f"{0 if entry.copy_out is None else len(entry.copy_out)} out; "
            f"{runner.cache.captures} graph(s) captured in all.")


def measure_replay(fusec: Any, torch: Any, args: argparse.Namespace) -> list[str]:
    """Replay time of a captured 20-kernel graph per kernel (CUDA events)."""
    model = fusec.compile(chain_text(REPLAY_KERNELS), device="gpu", fusion=False)
    assert model.launches == REPLAY_KERNELS, model.launches
    x = torch.randn(4096, device="cuda")
    model(x)
    model(x)
    runner = model.executor.graph
    graph = next(reversed(runner.cache.entries.values())).graph
    stream = runner.stream
    for _ in range(10):
        graph.launch(stream)
    samples = []
    import cupy

    for _ in range(args.repeat):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        for _ in range(args.iters):
            graph.launch(stream)
        end.record(stream)
        end.synchronize()
        samples.append(cupy.cuda.get_elapsed_time(start, end) * 1e3 / args.iters)
    replay = statistics.median(samples)
    call = host_time_us(torch, lambda: model(x), args.iters, args.repeat)
    return ["## launch_path: graph replay", "",
            f"A {REPLAY_KERNELS}-kernel graph (20-op chain at 4,096 elements, fusion off) "
            f"replays in {replay:.1f} µs: {replay / REPLAY_KERNELS:.2f} µs per kernel; "
            f"model(x) on a torch CUDA tensor {call:.1f} µs per call.", ""]


def first_call_child(mlir: str, params: str) -> int:
    """In a fresh process: fusec.compile + the first call; prints JSON."""
    t0 = time.perf_counter()
    import numpy as np

    import fusec
    from fusec.runtime import kernel_loader

    model = fusec.compile(mlir, device="gpu")
    t1 = time.perf_counter()
    with np.load(params) as npz:
        arrays = {k: npz[k] for k in npz.files}
    ins = [arrays[n] for n in model.input_names]
    t2 = time.perf_counter()
    model(*ins)
    t3 = time.perf_counter()
    print(json.dumps({"compile_s": t1 - t0, "first_call_s": t3 - t2,
                      "kernels": dict(kernel_loader.LAST_LOAD), "launches": model.launches}))
    return 0


def measure_mobilenet(torch: Any) -> list[str]:
    """MobileNetV2 via ONNX: cold and warm first call in fresh processes."""
    import numpy as np
    from onnx_models import export_and_import
    from torch_models import MODELS as BUILDERS

    with tempfile.TemporaryDirectory(prefix="fusec-first-call-") as tmp:
        tm = BUILDERS["mobilenet_v2"](False)
        with torch.no_grad():
            imported = export_and_import(torch, tm, Path(tmp), 65536)
        x = np.random.default_rng(0).standard_normal(tm.example.shape).astype(np.float32)
        params = Path(tmp) / "params.npz"
        np.savez(params, **{imported.x_arg: x}, **imported.params)
        env = {**os.environ, "FUSEC_CACHE_DIR": str(Path(tmp) / "cache"),
               "FUSEC_PROGRESS": "0"}
        rows = []
        for label in ("cold cache", "warm cache"):
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, __file__, "--first-call", str(imported.mlir),
                                   str(params)], env=env, capture_output=True, text=True,
                                  check=True)
            wall = time.perf_counter() - t0
            data = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append(f"| {label} | {data['compile_s']:.1f} | {data['first_call_s']:.2f} | "
                        f"{wall:.1f} | {data['kernels']} |")
    return ["## launch_path: MobileNetV2 via ONNX, first call in a new process", "",
            "| cache | fusec.compile (s) | first call (s) | process wall (s) | kernels |",
            "|---|---|---|---|---|", *rows, ""]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--mobilenet", action="store_true",
                   help="also time MobileNetV2's first call in fresh processes")
    p.add_argument("--first-call", nargs=2, metavar=("MLIR", "PARAMS"), help=argparse.SUPPRESS)
    p.add_argument("--out", default=str(HERE / "results"))
    args = p.parse_args(argv)
    from fusec.runtime.device import select_device

    select_device("gpu")
    if args.first_call:
        return first_call_child(*args.first_call)
    import torch
    from peers import PEERS

    import fusec

    torch.backends.cuda.matmul.allow_tf32 = False
    lines = _header(torch, float("nan"), float("nan"), title="fusec launch path")[:2]
    failed = 0
    jobs: list[Any] = [(name, lambda n=name, t=text, pe=PEERS[peer], g=gemm:
                        measure_program(n, t, pe, g, fusec, torch, args))
                       for name, (text, peer, gemm) in programs().items()]
    jobs.append(("replay", lambda: measure_replay(fusec, torch, args)))
    if args.mobilenet:
        jobs.append(("mobilenet", lambda: measure_mobilenet(torch)))
    for name, job in jobs:
        print(f"== {name}", flush=True)
        try:
            table = job()
        except Exception as err:  # one broken row must not lose the others
            failed += 1
            table = [f"## launch_path: {name} FAILED: {type(err).__name__}: {err}", ""]
        lines += table
        print("\n".join(table), flush=True)
    _write(args.out, lines, torch, append=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
