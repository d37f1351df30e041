"""Where a compiled model's time goes on the GPU: its kernels, fusec's and inductor's side by side.

    python3 bench/model_kernels.py MODEL [--dtype f32|f16|bf16] [--backends fusec,inductor]
        [--top 25] [--iters 5] [--host-profile K] [--out FILE.md]

MODEL is one of bench/real_models.py's (gpt2, llama, vit, resnet50, gpt2_layer,
mobilenet_v2), built at full size, converted to the dtype and compiled with each
backend (fusec's callable `fusec_backend`, inductor by name). After two
warm-up calls, `torch.profiler` records `--iters` calls; the table lists, per
backend, the GPU time per call of the kernels that took the most, grouped by
family (a kernel's name up to its template arguments, digit runs as `#`: one
GEMM or convolution algorithm is one row whatever its tile sizes; a fusec
kernel is one row per distinct body, its device symbol `fusec_<digest>` named
by the kernels.py kernels behind it), with the count of
launches per call and the share of the call's GPU time. "GPU busy" is the sum
of all kernels' times per call; the wall time per call is measured apart
(CUDA events, the same calls without the profiler) so launch gaps show as
wall minus busy.

Each section also gives the host's milliseconds per call: the time to *issue*
`--iters` calls without waiting for the GPU (a backend whose issue time passes its
GPU busy time is host-bound: its wall time is its host time). For fusec, the line
below says how the calls ran (`CompiledModel.call_counts`: launched one by one, or
CUDA-graph replays and those that copied), and `--host-profile K` adds the K Python
functions of most own time over those calls (cProfile), where the host's time goes.

Needs torch and a CUDA GPU; writes markdown to stdout and, with --out, to a file.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from real_models import BUILDERS, build  # noqa: E402  (beside this script)

from fusec.codegen.kernel_unit import SYMBOL_DIGITS  # noqa: E402

DTYPES = ("f32", "f16", "bf16")  # fusec's names: dialects/element_types.py has each torch name
_DIGITS = re.compile(r"\d+")


_FUSEC_SYMBOL = re.compile(rf"(fusec_[0-9a-f]{{{SYMBOL_DIGITS}}})(?![0-9a-f])")  # demangled or not


def family(name: str, fusec_kernels: dict[str, str] | None = None) -> str:
    """A kernel's family: its name up to template arguments, digit runs as `#`
    (tile sizes, inductor's kernel counters); a fusec kernel is its device
    symbol (one per distinct kernel body) named by the kernels behind it."""
    if (fusec := _FUSEC_SYMBOL.search(name)) is not None:
        symbol = fusec.group(1)
        return f"fusec {(fusec_kernels or {}).get(symbol, symbol)}"
    text = re.split(r"[<(\[]", name, maxsplit=1)[0].strip() or name
    return _DIGITS.sub("#", text)[:90]


def fusec_kernel_names() -> dict[str, str]:
    """Each fusec device symbol of the graphs compiled so far, as the
    kernels.py names behind it: the first and how many more."""
    from fusec.codegen.kernel_unit import units_of_source
    from fusec.importers.torch.backend import reports

    behind: dict[str, list[str]] = defaultdict(list)
    for graph in reports():
        for part in graph.fusec_partitions:
            program = part.model.program
            names = [launch.kernel for f in program.functions.values()
                     for launch in f.launches if launch.library is None]
            for kernel, unit in units_of_source(program.kernels_source, names).items():
                behind[unit.name].append(kernel)
    return {symbol: names[0] + (f" (+{len(names) - 1} alike)" if len(names) > 1 else "")
            for symbol, names in behind.items()}


def compiled_model(model_name: str, dtype: str, backend: str) -> tuple[Any, tuple[Any, ...]]:
    """The model compiled with `backend`, and its inputs, on CUDA in `dtype`."""
    import torch

    from fusec.dialects.element_types import element

    case = build(model_name)
    torch_dtype = getattr(torch, element(dtype).torch_name)
    module = case.module.to(torch_dtype).cuda()
    inputs = tuple(t.to(torch_dtype).cuda() if t.is_floating_point() else t.cuda()
                   for t in case.inputs)
    if backend == "fusec":
        from fusec.importers.torch.backend import fusec_backend

        return torch.compile(module, backend=fusec_backend), inputs
    return torch.compile(module, backend=backend), inputs


def wall_ms(fn: Any, inputs: tuple[Any, ...], iters: int) -> float:
    """Median wall time per call over `iters` calls (CUDA events)."""
    import torch

    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*inputs)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def host_ms(fn: Any, inputs: tuple[Any, ...], iters: int) -> float:
    """Host milliseconds per call to issue `iters` calls, not waiting for the GPU."""
    import torch

    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        fn(*inputs)
    seconds = time.perf_counter() - start
    torch.cuda.synchronize()
    return seconds / iters * 1e3


def host_profile(fn: Any, inputs: tuple[Any, ...], iters: int, top: int,
                 sync: Any = None) -> list[str]:
    """The `top` Python functions of most own time over `iters` calls
    (cProfile); `sync` waits for the device (default: CUDA's)."""
    if sync is None:
        import torch

        sync = torch.cuda.synchronize
    sync()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(iters):
        fn(*inputs)
    profiler.disable()
    sync()
    stats: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = sorted(stats.items(), key=lambda kv: -kv[1][2])[:top]
    lines = ["", f"Host profile over {iters} calls, by own time:", "",
             "| function | calls per call | own us per call | cumulative us per call |",
             "|---|---:|---:|---:|"]
    for (file, line, func), (_, ncalls, own, cumulative, _) in rows:
        where = f"{Path(file).name}:{line}({func})" if line else func
        lines.append(f"| `{where}` | {ncalls / iters:g} | {own / iters * 1e6:.1f} | "
                     f"{cumulative / iters * 1e6:.1f} |")
    return lines


def call_line() -> str:
    """How fusec's partitions ran the calls so far (`call_summary`)."""
    from torch_compile_models import call_summary

    from fusec.importers.torch.backend import reports

    return f"fusec calls so far, one by one / graph replays: {call_summary(reports())}."


def kernel_times(fn: Any, inputs: tuple[Any, ...], iters: int,
                 fusec_kernels: dict[str, str]) -> dict[str, tuple[float, int]]:
    """Per kernel family: GPU microseconds and launches, summed over `iters` calls."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn(*inputs)
        torch.cuda.synchronize()
    found: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for event in prof.events():
        if event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        row = found[family(event.name, fusec_kernels)]
        row[0] += event.device_time
        row[1] += 1
    return {k: (v[0], int(v[1])) for k, v in found.items()}


def report(model_name: str, dtype: str, backend: str, iters: int, top: int,
           profile_top: int = 0) -> str:
    """The markdown section of one backend."""
    import torch

    fn, inputs = compiled_model(model_name, dtype, backend)
    with torch.no_grad():
        for _ in range(2):
            fn(*inputs)
        torch.cuda.synchronize()
        wall = wall_ms(fn, inputs, max(iters, 5))
        host = host_ms(fn, inputs, max(iters, 5))
        names = fusec_kernel_names() if backend == "fusec" else {}
        times = kernel_times(fn, inputs, iters, names)
        profiled = host_profile(fn, inputs, max(iters, 5), profile_top) if profile_top else []
    busy_us = sum(t for t, _ in times.values()) / iters
    launches = sum(n for _, n in times.values()) / iters
    lines = [f"### {backend}: wall {wall:.3f} ms per call, GPU busy {busy_us / 1000:.3f} ms, "
             f"host {host:.3f} ms per call issued, {launches:.0f} kernels per call", "",
             *([call_line(), ""] if backend == "fusec" else []),
             "| kernel family | us per call | launches per call | share |",
             "|---|---:|---:|---:|"]
    for name, (us, n) in sorted(times.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append(f"| `{name}` | {us / iters:.1f} | {n / iters:.0f} | "
                     f"{us / iters / max(busy_us, 1e-9):.0%} |")
    return "\n".join([*lines, *profiled]) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Profile the model with each backend and print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=sorted(BUILDERS))
    ap.add_argument("--dtype", choices=DTYPES, default="f32")
    ap.add_argument("--backends", default="fusec,inductor")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--host-profile", type=int, default=0, metavar="K",
                    help="for fusec, the K Python functions of most own time per call")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.iters < 1 or args.top < 1 or args.host_profile < 0:
        print("error: --iters and --top must be >= 1, --host-profile >= 0", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("error: needs a CUDA GPU", file=sys.stderr)
        return 2
    text = (f"## {args.model} {args.dtype} on {torch.cuda.get_device_name()}\n\n"
            + "\n".join(report(args.model, args.dtype, b.strip(), args.iters, args.top,
                               args.host_profile if b.strip() == "fusec" else 0)
                        for b in args.backends.split(",") if b.strip()))
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
