"""Real PyTorch models through `torch.compile(backend="fusec")`, timed against
torch eager and `torch.compile` (inductor).

    python3 bench/torch_compile_models.py [--models gpt2_layer,mobilenet_v2]
        [--iters 20] [--repeat 5] [--out bench/results] [--device cuda|cpu] [--small]

Models (random weights, seeded, eval mode, fp32):
- `gpt2_layer`: a Hugging Face `transformers` GPT2Block (GPT-2 small: D768, 12
  heads) at B8 S512, with transformers' default attention implementation;
- `mobilenet_v2`: torchvision's `mobilenet_v2(weights=None)` at N32 224x224.

Each model is compiled with fusec's backend, checked against eager (the
relative tolerance of bench/run_gpu.py) and timed end to end, as a user
calls it (CUDA events around the compiled callable: fusec's kernels, the
PyTorch fallback nodes and the glue between partitions). The table gives
fusec's launches per call, its partitions and the nodes PyTorch runs. The
tables are printed and appended, with date, device and commit
($FUSEC_COMMIT), to OUT/DATE-DEVICE.md, the file run_gpu.py writes.

`--device cpu --small` runs the same compile and check at a tiny size on the
CPU with fusec's kernels in numba's CUDA simulator, without timing. Needs
torch, transformers (gpt2_layer) and torchvision (mobilenet_v2); a model
whose package is missing is reported and skipped.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # run_gpu lives beside this file

MODELS = ["gpt2_layer", "mobilenet_v2"]


@dataclass
class Case:
    """A model ready to compile: the module, its example input and the size."""

    name: str
    module: Any
    example: Any
    size: str


def gpt2_layer(torch: Any, small: bool) -> Case:
    """One transformers GPT2Block; the wrapper returns its hidden states."""
    from transformers import GPT2Config
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    b, s, d, h = (1, 8, 32, 2) if small else (8, 512, 768, 12)
    config = GPT2Config(n_embd=d, n_head=h, n_positions=max(s, 1024), n_layer=1)
    torch.manual_seed(0)
    block = GPT2Block(config, layer_idx=0).eval()

    class Layer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block = block

        def forward(self, x: Any) -> Any:
            out = self.block(x)
            return out[0] if isinstance(out, tuple) else out

    impl = getattr(config, "_attn_implementation", None) or "default"
    return Case("gpt2_layer", Layer().eval(), torch.randn(b, s, d),
                f"B{b} S{s} D{d} H{h}, attention '{impl}'")


def mobilenet_v2(torch: Any, small: bool) -> Case:
    """torchvision's MobileNetV2 with random weights."""
    from torchvision.models import mobilenet_v2 as build

    torch.manual_seed(0)
    module = build(weights=None, num_classes=10 if small else 1000).eval()
    n, hw = (1, 32) if small else (32, 224)
    return Case("mobilenet_v2", module, torch.randn(n, 3, hw, hw), f"N{n} {hw}x{hw}")


BUILDERS: dict[str, Callable[[Any, bool], Case]] = {
    "gpt2_layer": gpt2_layer, "mobilenet_v2": mobilenet_v2}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; returns the exit code."""
    args = _parse(argv)
    from fusec.runtime.device import select_device

    select_device("gpu" if args.device == "cuda" else "sim")
    import torch

    from fusec.importers.torch import Backend

    lines: list[str] = []
    if args.device == "cuda":
        from run_gpu import _ceilings, _header

        copy_bw, gemm_rate = _ceilings(torch)
        lines += _header(torch, copy_bw, gemm_rate, "torch.compile(backend='fusec')")
    failed = False
    for name in args.models.split(","):
        try:
            case = BUILDERS[name](torch, args.small)
        except ImportError as err:
            print(f"{name}: skipped ({err})", file=sys.stderr)
            continue
        try:
            lines += _run_case(torch, case, Backend(), args)
        except Exception:  # one model failing must not hide the other's table
            failed = True
            traceback.print_exc()
            lines += [f"## {name}: FAILED (see the log)", ""]
    print("\n".join(lines))
    if args.device == "cuda" and lines:
        from run_gpu import _write

        _write(args.out, lines, torch, append=True)
    return 1 if failed else 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--out", default=str(HERE / "results"))
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--small", action="store_true", help="tiny shapes (needed with cpu)")
    args = p.parse_args(argv)
    if args.device == "cpu" and not args.small:
        p.error("--device cpu runs in the simulator: add --small")
    return args


def _run_case(torch: Any, case: Case, backend: Any, args: argparse.Namespace) -> list[str]:
    from run_gpu import _check

    device = args.device
    module, x = case.module.to(device), case.example.to(device)
    torch._dynamo.reset()
    seconds: dict[str, float] = {}
    with torch.no_grad():
        ref = module(x)
        fusec_fn = torch.compile(module, backend=backend)
        t0 = time.perf_counter()
        out = fusec_fn(x)
        _sync(torch, device)
        seconds["fusec compile + first call"] = time.perf_counter() - t0
        status = _check(torch, out, ref)
        launches = sum(r.launches for r in backend.reports)
        parts = sum(len(r.fusec_partitions) for r in backend.reports)
        fallback = [n for r in backend.reports for n in r.fallback_nodes]
        if device != "cuda":
            return _summary(case, status, launches, parts, fallback, seconds)
        from run_gpu import _time_torch

        times = {"fusec (torch.compile backend)": _time_torch(torch, fusec_fn, [x], args),
                 "torch eager": _time_torch(torch, module, [x], args)}
        torch._dynamo.reset()
        inductor = torch.compile(module)
        t0 = time.perf_counter()
        inductor(x)
        _sync(torch, device)
        seconds["inductor compile + first call"] = time.perf_counter() - t0
        times["torch.compile (inductor)"] = _time_torch(torch, inductor, [x], args)
    return _table(case, times, status, launches, parts, fallback, seconds)


def _sync(torch: Any, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _summary(case: Case, status: str, launches: int, parts: int, fallback: list[str],
             seconds: dict[str, float]) -> list[str]:
    return [f"## {case.name}, {case.size} (simulator): fusec {status}, {launches} launches, "
            f"{parts} fusec partition(s), PyTorch runs {len(fallback)} node(s) "
            f"{fallback[:8]}", _seconds(seconds), ""]


def _table(case: Case, times: dict[str, float], status: str, launches: int, parts: int,
           fallback: list[str], seconds: dict[str, float]) -> list[str]:
    fusec_ms = times["fusec (torch.compile backend)"]
    out = [f"## {case.name} via torch.compile(backend='fusec'), {case.size}  (fusec {status})",
           "", "| variant | time (ms) | launches | partitions | fusec speed-up |",
           "|---|---|---|---|---|"]
    for name, ms in times.items():
        is_fusec = name.startswith("fusec")
        cells = (str(launches), f"{parts} fusec + {len(fallback)} PyTorch node(s)") \
            if is_fusec else ("", "")
        out.append(f"| {name} | {ms:.3f} | {cells[0]} | {cells[1]} | {ms / fusec_ms:.2f}x |")
    shown = ", ".join(fallback[:12]) + (" ..." if len(fallback) > 12 else "")
    out += ["", f"Nodes PyTorch runs: {shown or 'none'}.", _seconds(seconds), ""]
    return out


def _seconds(seconds: dict[str, float]) -> str:
    return "Seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()) + "."


if __name__ == "__main__":
    sys.exit(main())
