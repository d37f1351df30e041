"""Full-size PyTorch models through ONNX into fusec, timed against torch.

    python3 bench/onnx_models.py [--models mobilenet_v2,gpt2_block] [--iters 20]
        [--repeat 7] [--no-compile] [--no-fusion-off] [--out bench/results]
        [--device cuda|cpu] [--small]

For each model of bench/torch_models.py (random weights): export it from
PyTorch to ONNX (opset 18, the TorchScript exporter), import it with fusec's
importer (weights of at least `--params-above` bytes become function
arguments, as `fusec import --params-above` does, so the `.mlir` stays
small), compile it with fusion on and off, check both against torch eager,
and time fusec fused, fusion off, torch eager and torch.compile with the
CUDA-event method and table of bench/run_gpu.py (whose helpers it uses).
The tables are printed and appended, with date, device and commit
($FUSEC_COMMIT), to OUT/DATE-DEVICE.md, the file run_gpu.py writes.

`--device cpu` (only with `--small`) runs the same export, import, compile
and check at a tiny size with torch on the CPU and fusec's kernels in numba's
CUDA simulator, without timing: nothing there touches CUDA.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # run_gpu and torch_models live beside this file

from run_gpu import (  # noqa: E402
    _ceilings,
    _check,
    _header,
    _row_table,
    _time_fusec,
    _time_torch,
    _write,
)

MODELS = ["mobilenet_v2", "gpt2_block"]
OPSET = 18
# Float initializers of at least this many bytes become arguments: conv and
# Linear weights (dense hex constants would make the .mlir tens of MB), while
# BatchNorm parameters and biases stay constants.
PARAMS_ABOVE = 65536


@dataclass
class Imported:
    """One model exported and imported: what fusec compiles and the timings
    of getting there."""

    mlir: Path
    x_arg: str
    params: dict[str, Any]
    seconds: dict[str, float] = field(default_factory=dict[str, float])


def main(argv: list[str] | None = None) -> int:
    """Run the ONNX model benchmarks; returns the exit code."""
    args = _parse(argv)
    from fusec.analysis.diagnostics import FusecError
    from fusec.runtime.device import select_device

    try:
        # Before anything imports numba.cuda: "cpu" means numba's simulator.
        select_device("gpu" if args.device == "cuda" else "sim")
    except FusecError as err:
        print(f"error: {err.message}\n"
              "(without a GPU: --device cpu --small)", file=sys.stderr)
        return 2
    import torch
    from torch_models import MODELS as BUILDERS

    lines: list[str] = []
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        copy_bw, gemm_rate = _ceilings(torch)
        lines = _header(torch, copy_bw, gemm_rate, title="fusec ONNX model benchmarks")
    # no_grad, not inference_mode: modules are moved to the GPU inside, and
    # torch.compile must see ordinary parameters.
    failed = 0
    with tempfile.TemporaryDirectory(prefix="fusec-onnx-") as tmp, torch.no_grad():
        for name in args.models.split(","):
            print(f"== {name}", flush=True)
            try:
                tm = BUILDERS[name](args.small)
                imported = export_and_import(torch, tm, Path(tmp), args.params_above)
                if args.device == "cuda":
                    table = _bench_gpu(torch, tm, imported, args, copy_bw, gemm_rate)
                else:
                    table = _check_sim(torch, tm, imported)
            except Exception as err:  # one model's failure must not lose the others' tables
                traceback.print_exc()
                failed += 1
                table = [f"## {name} via ONNX: FAILED ({type(err).__name__}: {err})", ""]
            lines += table
            print("\n".join(table), flush=True)
    if args.device == "cuda":
        _write(args.out, lines, torch, append=True)
    return 1 if failed else 0


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(MODELS),
                   help=f"comma-separated, of: {', '.join(MODELS)}")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--no-fusion-off", action="store_true",
                   help="skip fusec with fusion off (one kernel per op: MobileNetV2's "
                        "hundreds of kernels take minutes of numba JIT on the first call)")
    p.add_argument("--out", default=str(HERE / "results"))
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cuda: time on the GPU; cpu: check only, fusec in numba's simulator")
    p.add_argument("--small", action="store_true", help="tiny models (for the simulator)")
    p.add_argument("--params-above", type=int, default=PARAMS_ABOVE, metavar="BYTES",
                   help="float weights of at least BYTES become fusec arguments")
    args = p.parse_args(argv)
    unknown = [m for m in args.models.split(",") if m not in MODELS]
    if unknown:
        p.error(f"unknown model '{unknown[0]}' (known: {', '.join(MODELS)})")
    if args.device == "cpu" and not args.small:
        p.error("--device cpu runs fusec's kernels in numba's simulator, far too slow at "
                "full size: add --small")
    return args


def export_and_import(torch: Any, tm: Any, tmp: Path, params_above: int) -> Imported:
    """Export `tm` (a torch_models.TorchModel) to TMP/NAME.onnx, import it
    with fusec's importer and write TMP/NAME.mlir."""
    from fusec.importers.onnx import import_model

    onnx_path, mlir = tmp / f"{tm.name}.onnx", tmp / f"{tm.name}.mlir"
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        # The TorchScript exporter's deprecation notice and tracer warnings
        # (shapes read as Python numbers) are expected: shapes are static.
        warnings.simplefilter("ignore")
        torch.onnx.export(tm.module, (tm.example,), str(onnx_path), input_names=["x"],
                          output_names=["y"], opset_version=OPSET, dynamo=False,
                          do_constant_folding=tm.fold_constants)
    t1 = time.perf_counter()
    result = import_model(onnx_path, filename=str(mlir), params_above=params_above)
    mlir.write_text(result.text, encoding="utf-8")
    t2 = time.perf_counter()
    return Imported(mlir, result.inputs["x"], result.params,
                    {"export": t1 - t0, "import": t2 - t1})


def compile_both(imported: Imported, device: str, off: bool = True) -> tuple[Any, Any | None]:
    """fusec's fused and fusion-off models (compile times in `imported`);
    no fusion-off model when `off` is false."""
    import fusec

    models = []
    for fusion in (True, False) if off else (True,):
        t0 = time.perf_counter()
        models.append(fusec.compile(imported.mlir, fusion=fusion, device=device))
        imported.seconds["compile " + ("fused" if fusion else "off")] = time.perf_counter() - t0
    return models[0], (models[1] if off else None)


def fusec_inputs(model: Any, imported: Imported, x: Any, weights: dict[str, Any]) -> list[Any]:
    """A fusec model's arguments in its order: the input, then the weights
    (`weights`: `imported.params` as CUDA tensors, or as they are)."""
    return [x if arg == imported.x_arg else weights[arg] for arg in model.input_names]


def _bench_gpu(torch: Any, tm: Any, imported: Imported, args: argparse.Namespace,
               copy_bw: float, gemm_rate: float) -> list[str]:
    """Check and time one model on the GPU; returns its table lines."""
    fused, off = compile_both(imported, "gpu", not args.no_fusion_off)
    module = tm.module.to("cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(tm.example.shape, device="cuda", generator=gen)
    weights = {k: torch.tensor(a, device="cuda") for k, a in imported.params.items()}
    inputs = fusec_inputs(fused, imported, x, weights)
    variants = [("fused", fused, inputs)]
    if off is not None:
        variants.append(("off", off, fusec_inputs(off, imported, x, weights)))
    ref = module(x)
    status = []
    for label, model, ins in variants:
        t0 = time.perf_counter()
        out = model(*ins)
        torch.cuda.synchronize()
        imported.seconds[f"first call {label}"] = time.perf_counter() - t0
        status.append(_check(torch, out, ref))
    times = {"fusec": _time_fusec(torch, fused, inputs, args)}
    if off is not None:
        times["fusion off"] = _time_fusec(torch, off, variants[1][2], args)
    else:
        status.append("not run (--no-fusion-off)")
    times["torch eager"] = _time_torch(torch, module, [x], args)
    if not args.no_compile:
        t0 = time.perf_counter()
        compiled = torch.compile(module)
        compiled(x)
        torch.cuda.synchronize()
        imported.seconds["torch.compile"] = time.perf_counter() - t0
        times["torch.compile"] = _time_torch(torch, compiled, [x], args)
    moved, flops = floor_work(torch, module, x, ref)
    floor = max(moved / copy_bw, flops / gemm_rate)
    title = f"{tm.name} via ONNX, {tm.size}"
    off_launches = off.launches if off is not None else 0
    table = _row_table(title, times, floor, fused.launches, off_launches, status)
    return [*table, _seconds_line(imported), ""]


def _check_sim(torch: Any, tm: Any, imported: Imported) -> list[str]:
    """Compile, run in numba's simulator and check against torch on the CPU
    (no timing: the simulator's speed means nothing)."""
    import numpy as np

    fused, off = compile_both(imported, "sim")
    x = torch.randn(tm.example.shape, generator=torch.Generator().manual_seed(0))
    ref = tm.module(x)
    rows = [f"## {tm.name} via ONNX, {tm.size} (CPU: fusec in numba's simulator, "
            "checked against torch eager; not timed)", "",
            "| variant | launches | check |", "|---|---|---|"]
    for label, model in (("fusec", fused), ("fusion off", off)):
        ins = fusec_inputs(model, imported, x.numpy(), imported.params)
        t0 = time.perf_counter()
        out = model(*ins)
        imported.seconds[f"run {label} (sim)"] = time.perf_counter() - t0
        rows.append(f"| {label} | {model.launches} | "
                    f"{_check(torch, torch.from_numpy(np.asarray(out)), ref)} |")
    return [*rows, "", _seconds_line(imported), ""]


def floor_work(torch: Any, module: Any, x: Any, out: Any) -> tuple[int, float]:
    """(bytes that must move, flops that must run), as bench/peers.py counts
    them: the input, every weight and the output moved once; the flops of
    convolutions and matrix products, counted by torch's FlopCounterMode."""
    from torch.utils.flop_counter import FlopCounterMode

    weights = [t for t in module.state_dict().values() if t.is_floating_point()]
    moved = sum(t.numel() * t.element_size() for t in [x, out, *weights])
    counter = FlopCounterMode(display=False)
    with counter:
        module(x)
    return moved, float(counter.get_total_flops())


def _seconds_line(imported: Imported) -> str:
    """Where the time before the timed loops went (first calls include
    numba's JIT of every kernel), and how many weights are arguments."""
    parts = ", ".join(f"{k} {v:.1f} s" for k, v in imported.seconds.items())
    return f"Set-up: {parts}; {len(imported.params)} weights passed as arguments."


if __name__ == "__main__":
    sys.exit(main())
