"""Real PyTorch models through `torch.compile(backend=fusec_backend)` in fp32, f16 and
bf16, timed against torch eager and `torch.compile` (inductor).

    python3 bench/torch_compile_models.py [--models gpt2,llama,vit,bert,gpt2_layer,...]
        [--dtypes f32,f16,bf16] [--iters 20] [--repeat 5] [--out bench/results]
        [--device cuda|cpu] [--small] [--fusec-options JSON]

Models (bench/real_models.py: random weights, seeded, eval mode): `gpt2`
(Hugging Face GPT-2, 6 layers, B4 S256), `llama` (a Llama-style decoder:
4 layers, hidden 1024, 16 query / 4 key-value heads, B2 S256), `vit` (timm's
`vit_base_patch16_224` at B16, torchvision's `vit_b_16` where timm is
missing: the table says which), `bert` (Hugging Face BERT-base, B8 S256 with
a padding mask), `gpt2_layer` (one GPT2Block, B8 S512),
`mobilenet_v2` (N32 224x224), `roberta` (RoBERTa-base, B8 S256, padded),
`t5_encoder` (T5-small's encoder, B8 S256), `convnext` (timm's ConvNeXt-T,
B32 224x224), `swin` (timm's Swin-T, B16 224x224); `resnet50` (B32 224x224)
on request. Each
`--dtypes` entry converts the model and its floating-point inputs
(`model.to(dtype)`; token ids stay integers).

Per model and dtype, the model is compiled with fusec's backend (the callable
`fusec.importers.torch.backend.fusec_backend`), checked against eager in the
same dtype (max |fusec - eager| within the dtype's tolerance times max
|eager|: bench/run_gpu.py's bound for f32, the element type's for f16 and
bf16) and timed end to end as a user calls it (CUDA events around the
compiled callable: fusec's kernels, the nodes PyTorch runs and the glue
between partitions), beside eager and inductor. One table gives the times,
inductor's time / fusec's, fusec's launches per call, its partitions, the FX
nodes fusec ran and those left to PyTorch; a second groups the nodes left to
PyTorch by op with the reason (the backend's `fallback:` remarks). Both are
printed and appended, with date, device and commit ($FUSEC_COMMIT), to
OUT/DATE-DEVICE.md, the file run_gpu.py writes.

`--fusec-options JSON` hands fusec's backend these options (a JSON object,
e.g. `'{"ptxas_wait": 3}'`; the table's header names them), to compare two
settings on one machine.

`--device cpu --small` runs the same compile and check at a tiny size of each
model on the CPU with fusec's kernels in numba's CUDA simulator, untimed.
Needs torch; transformers (gpt2, llama, bert, gpt2_layer, roberta, t5_encoder),
timm or torchvision (vit), timm (convnext, swin), torchvision (mobilenet_v2,
resnet50): a model whose package is missing
is reported and skipped.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # run_gpu and half_precision live beside this file

from backend_options import parse_options  # noqa: E402  (beside this script)
from real_models import BUILDERS, Case  # noqa: E402  (beside this script)

MODELS = ["gpt2", "llama", "vit", "bert", "gpt2_layer", "mobilenet_v2", "roberta", "t5_encoder",
          "convnext", "swin"]
DTYPES = ("f32", "f16", "bf16")


@dataclass
class Result:
    """One model in one dtype: what fusec did, the check and (on CUDA) the times."""

    model: str
    dtype: str
    size: str
    status: str
    launches: int = 0
    partitions: int = 0
    graphs: int = 0
    fused: int = 0
    left: int = 0
    glue: int = 0
    fallbacks: list[tuple[str, int, str]] = field(default_factory=list)
    times: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    calls: str = "-"
    """How fusec's partitions ran their calls (`call_summary`)."""


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; returns the exit code."""
    args = _parse(argv)
    from fusec.runtime.device import select_device

    select_device("gpu" if args.device == "cuda" else "sim")
    import torch

    lines: list[str] = []
    if args.device == "cuda":
        from run_gpu import _ceilings, _header

        copy_bw, gemm_rate = _ceilings(torch)
        title = "torch.compile(backend=fusec_backend)"
        if args.fusec_options:
            title = f"torch.compile(backend=fusec_backend, options={args.fusec_options})"
        lines += _header(torch, copy_bw, gemm_rate, title)
    results: list[Result] = []
    skipped: list[str] = []
    for name in args.models:
        for dtype in args.dtypes:
            try:
                case = BUILDERS[name](torch, args.small)
            except ImportError as err:
                print(f"{name}: skipped ({err})", file=sys.stderr)
                skipped.append(f"{name} ({err})")
                break
            try:
                results.append(run_case(torch, case, dtype, args))
            except Exception as err:  # one model failing must not hide the others' rows
                traceback.print_exc()
                first = (str(err).strip().splitlines() or [""])[0][:160]
                results.append(Result(name, dtype, case.size,
                                      f"FAILED: {type(err).__name__}: {first}"))
    lines += report(results, skipped, timed=args.device == "cuda")
    print("\n".join(lines))
    if args.device == "cuda" and results:
        from run_gpu import _write

        _write(args.out, lines, torch, append=True)
    return 1 if any(r.status.startswith("FAILED") for r in results) else 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(MODELS),
                   help=f"comma-separated, of {', '.join(BUILDERS)}")
    p.add_argument("--dtypes", default=",".join(DTYPES),
                   help=f"comma-separated, of {', '.join(DTYPES)}")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--out", default=str(HERE / "results"))
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--small", action="store_true", help="tiny shapes (needed with cpu)")
    p.add_argument("--fusec-options", metavar="JSON", default="",
                   help='the fusec backend\'s options, a JSON object (e.g. \'{"ptxas_wait": 3}\')')
    args = p.parse_args(argv)
    try:
        args.fusec_options = parse_options(args.fusec_options)
    except ValueError as err:
        p.error(str(err))
    args.models = _names(p, "--models", args.models, list(BUILDERS))
    args.dtypes = _names(p, "--dtypes", args.dtypes, list(DTYPES))
    if args.device == "cpu" and not args.small:
        p.error("--device cpu runs in the simulator: add --small")
    if args.iters < 1 or args.repeat < 1:
        p.error("--iters and --repeat must be at least 1")
    return args


def _names(p: argparse.ArgumentParser, flag: str, text: str, known: list[str]) -> list[str]:
    """The comma-separated list of `flag`, each one of `known`."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        p.error(f"{flag}: unknown {', '.join(unknown) or '(none given)'}; "
                f"expected some of: {', '.join(known)}")
    return list(dict.fromkeys(names))


def convert(torch: Any, module: Any, inputs: Sequence[Any], dtype: str
            ) -> tuple[Any, tuple[Any, ...]]:
    """`module` and `inputs` in `dtype` (f32, f16, bf16): the module's parameters
    and buffers and the floating-point inputs; integer inputs (token ids) stay."""
    from fusec.dialects.element_types import element

    kind = getattr(torch, element(dtype).torch_name)
    return module.to(kind), tuple(t.to(kind) if t.is_floating_point() else t for t in inputs)


def main_output(torch: Any, model: Any) -> Any:
    """`model` wrapped to return one tensor: a Hugging Face model's
    `last_hidden_state`, a tuple's first element, or the tensor itself."""

    class MainOutput(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: Any) -> Any:
            out = self.model(*inputs)
            if hasattr(out, "last_hidden_state"):
                return out.last_hidden_state
            return out[0] if isinstance(out, tuple | list) else out

    return MainOutput().eval()


def run_case(torch: Any, case: Case, dtype: str, args: argparse.Namespace) -> Result:
    """Compile `case` in `dtype` with fusec's backend, check it against eager and,
    on CUDA, time it beside eager and inductor."""
    from half_precision import tolerance
    from run_gpu import TOLERANCE

    from fusec.importers.torch.backend import fusec_backend, reports

    device = args.device
    module, inputs = convert(torch, main_output(torch, case.module), case.inputs, dtype)
    module, inputs = module.to(device), tuple(t.to(device) for t in inputs)
    torch._dynamo.reset()
    seconds: dict[str, float] = {}
    before = reports()
    with torch.no_grad():
        ref = module(*inputs)
        fusec_fn = torch.compile(module, backend=fusec_backend,
                                 options=args.fusec_options or None)
        t0 = time.perf_counter()
        out = fusec_fn(*inputs)
        _sync(torch, device)
        seconds["fusec"] = time.perf_counter() - t0
        status = agreement(out, ref, tolerance(dtype, TOLERANCE))
        new = [r for r in reports() if not any(r is b for b in before)]
        result = summarize(case, dtype, status, new)
        result.seconds = seconds
        if device != "cuda":
            return result
        from run_gpu import _time_torch

        result.times = {"eager": _time_torch(torch, module, list(inputs), args),
                        "fusec": _time_torch(torch, fusec_fn, list(inputs), args)}
        result.calls = call_summary(new)
        torch._dynamo.reset()
        inductor = torch.compile(module)
        t0 = time.perf_counter()
        inductor(*inputs)
        _sync(torch, device)
        seconds["inductor"] = time.perf_counter() - t0
        result.times["inductor"] = _time_torch(torch, inductor, list(inputs), args)
    return result


def agreement(out: Any, ref: Any, tol: float) -> str:
    """`ok (4.1e-03 <= 0.02)`: max |out - ref| / max |ref| against `tol`
    (bench/run_gpu.py's check), or what differs."""
    if out.dtype != ref.dtype or out.shape != ref.shape:
        return (f"MISMATCH: {out.dtype} {tuple(out.shape)}, eager gives "
                f"{ref.dtype} {tuple(ref.shape)}")
    err = (out.float() - ref.float()).abs().max().item()
    rel = err / max(ref.float().abs().max().item(), 1e-30)
    return f"ok ({rel:.1e} <= {tol:g})" if rel <= tol else f"MISMATCH ({rel:.1e} > {tol:g})"


def _sync(torch: Any, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def summarize(case: Case, dtype: str, status: str, graph_reports: Sequence[Any]) -> Result:
    """The counts of the backend's reports for one compiled model (every graph
    Dynamo handed over; each runs once per call)."""
    return Result(
        case.name, dtype, case.size, status,
        launches=sum(r.launches for r in graph_reports),
        partitions=sum(len(r.fusec_partitions) for r in graph_reports),
        graphs=len(graph_reports),
        fused=sum(len(r.fused_nodes) for r in graph_reports),
        left=sum(len(r.fallback_nodes) for r in graph_reports),
        glue=sum(len(r.glue) for r in graph_reports),
        fallbacks=fallback_ops(graph_reports))


def call_summary(graph_reports: Sequence[Any]) -> str:
    """How the partitions' calls ran, summed over every fusec partition
    (`CompiledModel.call_counts`): "one by one / graph replays (of them
    copying, MB copied per copying replay)". A timing whose replays copy,
    or whose calls launch one by one, measures more than the kernels."""
    from fusec.runtime.graph_cache import CallCounts

    total = sum((part.model.call_counts() for graph in graph_reports
                 for part in graph.fusec_partitions
                 if part.model is not None),  # a report without its compiled model
                CallCounts())
    text = f"{total.one_by_one} / {total.replays}"
    if total.copying_replays:
        text += (f" ({total.copying_replays} copying, "
                 f"{total.copied_bytes / total.copying_replays / 2**20:.1f} MB each)")
    return text


def fallback_ops(graph_reports: Sequence[Any]) -> list[tuple[str, int, str]]:
    """The FX nodes left to PyTorch grouped by op over every graph: (op,
    nodes, the first node's reason), most nodes first (each graph's
    `GraphReport.fallbacks`)."""
    counts: Counter[str] = Counter()
    reasons: dict[str, str] = {}
    for graph in graph_reports:
        for op, n, why in graph.fallbacks_by_op():
            counts[op] += n
            reasons.setdefault(op, why)
    return [(op, n, reasons[op]) for op, n in counts.most_common()]


def report(results: Sequence[Result], skipped: Sequence[str], timed: bool) -> list[str]:
    """The markdown: the models, the summary table, the fallbacks by op."""
    lines = ["## Real models through torch.compile(backend=fusec_backend)", ""]
    sizes = dict.fromkeys(f"`{r.model}`: {r.size}" for r in results)
    lines += ["Models: " + "; ".join(sizes) + "." if sizes else "No model ran.", ""]
    if skipped:
        lines += ["Skipped (package missing): " + "; ".join(skipped) + ".", ""]
    if not results:
        return lines
    times = ("eager ms | inductor ms | fusec ms | inductor / fusec | fusec calls: one by one "
             "/ graph replays | ") if timed else ""
    lines += [f"| model | dtype | {times}fusec launches | fusec partitions (graphs) | "
              "FX nodes in fusec | left to PyTorch (glue) | vs eager | compile s (fusec"
              f"{', inductor' if timed else ''}) |",
              "|---|---|" + "---:|" * (5 if timed else 0) + "---:|---:|---:|---:|---|---:|"]
    for r in results:
        cells = ""
        if timed:
            t = r.times
            ratio = f"{t['inductor'] / t['fusec']:.2f}x" if t else "-"
            cells = "".join(f"{t[k]:.3f} | " if k in t else "- | "
                            for k in ("eager", "inductor", "fusec")) + f"{ratio} | {r.calls} | "
        compile_s = ", ".join(f"{r.seconds[k]:.1f}" for k in ("fusec", "inductor")
                              if k in r.seconds) or "-"
        lines.append(f"| {r.model} | {r.dtype} | {cells}{r.launches} | {r.partitions} "
                     f"({r.graphs}) | {r.fused} | {r.left} ({r.glue}) | {r.status} | "
                     f"{compile_s} |")
    lines += ["", *fallback_table(results)]
    return lines


def fallback_table(results: Sequence[Result]) -> list[str]:
    """One row per (model, dtype, op) left to PyTorch."""
    rows = [f"| {r.model} | {r.dtype} | {op} | {n} | {_cell(why)} |"
            for r in results for op, n, why in r.fallbacks]
    if not rows:
        return ["No FX node left to PyTorch.", ""]
    return ["Nodes left to PyTorch, by op (the first node's reason):", "",
            "| model | dtype | op | nodes | reason |", "|---|---|---|---:|---|",
            *rows, ""]


def _cell(text: str) -> str:
    """`text` safe in a markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


if __name__ == "__main__":
    sys.exit(main())
