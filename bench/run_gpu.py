"""The fusec benchmark suite: every row of BENCHMARKS.md on a CUDA GPU.

    python bench/run_gpu.py [--rows chain16,softmax] [--iters 20] [--repeat 7]
    python bench/run_gpu.py --dtype bf16    # the half rows in bf16 (or f16)
    python bench/run_gpu.py --dtype f16 --rows scale_shift_residual,chain16  # programs retyped

For each model of bench/models it measures, in one run and on the same random
inputs: fusec with fusion, fusec with fusion off (one kernel per op), torch
eager and torch.compile of the same ops (bench/peers.py), and the floor:
bytes that must move / the device-to-device copy bandwidth measured in the
same run (flops / the measured cuBLAS fp32 rate for contractions, whichever
is larger). Times are CUDA-event medians over `repeat` runs of `iters` calls
after a warm-up. fusec's outputs are checked against torch eager first.
Inputs are seeded: floats from N(0, 1) in the input's type, integers
uniform below the smallest table axis of the `nn.gather`s they index (so
token ids are valid), else below the reference's DEFAULT_INDEX_BOUND. A
table read only through gathers counts the gathered rows in the floor.
Prints one table and writes it, with date, device and commit, under
bench/results/. Needs PyTorch with CUDA (an optional extra).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from half_precision import (  # noqa: E402  (beside this script)
    DTYPES,
    HALF_ROWS,
    host_array,
    retype,
    row_name,
    tolerance,
    torch_dtype,
)

from fusec.dialects.element_types import element  # noqa: E402

ROWS = ["chain16", "softmax", "add_layernorm_gelu", "mlp", "mlp_simt", "attention",
        "inverted_residual", "gpt2_block"]
# Further rows beyond BENCHMARKS.md, run only when named in --rows.
EXTRA_ROWS = ["column_sum", "column_sum_narrow"]
# Programs outside the rows fusec's kernels were shaped around (bench/programs):
# their torch peers are the same ops run by bench/torch_peer.py, so a new
# program is a new .mlir file and nothing else. `--rows programs` runs them all.
PROGRAMS = sorted(p.stem for p in (HERE / "programs").glob("*.mlir"))
# Rows that compile a model of bench/models with a fixed GEMM choice:
# "mlp_simt" is mlp.mlir with the library GEMM off (the fused SIMT kernel).
VARIANTS = {"mlp_simt": ("mlp", "fused")}
# Output agreement with torch eager, relative to max |reference| (fp32,
# different summation orders and erf implementations).
TOLERANCE = 2e-3


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    p.add_argument("--rows", default=",".join(ROWS),
                   help=f"comma-separated, of: {', '.join(ROWS + EXTRA_ROWS)} "
                        "(default: the BENCHMARKS.md rows)")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--reference", action="store_true",
                   help="also check fusec against the float64 NumPy reference interpreter")
    p.add_argument("--dtype", choices=DTYPES, default="f32",
                   help="element type of the models, inputs and torch peers: f16 and bf16 "
                        f"rewrite the f32 models (default rows then: {', '.join(HALF_ROWS)})")
    p.add_argument("--autotune", action="store_true",
                   help="also time fusec with --autotune (a 'fusec autotuned' column "
                   "beside the model-only 'fusec' one)")
    p.add_argument("--out", default=str(HERE / "results"))
    args = p.parse_args(argv)
    rows = [r for name in args.rows.split(",")
            for r in (PROGRAMS if name == "programs" else [name])]
    if args.dtype != "f32" and args.rows == p.get_default("rows"):
        rows = list(HALF_ROWS)
    allowed = ROWS + EXTRA_ROWS + PROGRAMS
    unknown = [r for r in rows if r not in allowed]
    if unknown:
        known = ", ".join([*allowed, "programs"])
        p.error(f"unknown row '{unknown[0]}' for --dtype {args.dtype} (known: {known})")

    import fusec
    from fusec.runtime.device import select_device

    select_device("gpu")
    import torch
    from peers import LIBRARY_PEERS, PEERS, floor_work

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    copy_bw, gemm_rate = _ceilings(torch, args.dtype)
    lines = _header(torch, copy_bw, gemm_rate, dtype=args.dtype)
    failed = 0
    for row in rows:
        print(f"== {row}", flush=True)
        try:
            if row in PROGRAMS:
                lines += _measure_program(row, fusec, torch, args, copy_bw, gemm_rate)
            else:
                model, _ = VARIANTS.get(row, (row, "auto"))
                lines += _measure_row(row, fusec, torch, PEERS[model], floor_work, args,
                                      copy_bw, gemm_rate, LIBRARY_PEERS.get(model, {}))
        except Exception as err:  # one broken row must not lose the others
            failed += 1
            lines += [f"## {row}  FAILED: {type(err).__name__}: {err}", ""]
        print("\n".join(lines[-8:]), flush=True)
        _write(args.out, lines, torch, quiet=True)  # what is measured survives a time limit
    _write(args.out, lines, torch)
    return 1 if failed else 0


def _measure_row(row: str, fusec: Any, torch: Any, peer: Any, floor_work: Any, args: Any,
                 copy_bw: float, gemm_rate: float,
                 library: dict[str, Any] | None = None) -> list[str]:
    """Check and time one model (and the `library` peers, checked like
    torch eager); its table lines."""
    model, gemm = VARIANTS.get(row, (row, "auto"))
    path = HERE / "models" / f"{model}.mlir"
    source = retype(path.read_text(encoding="utf-8"), args.dtype)
    fused = fusec.compile(source, fusion=True, device="gpu", gemm=gemm)
    off = fusec.compile(source, fusion=False, device="gpu", gemm=gemm)
    tuned = fusec.compile(source, fusion=True, device="gpu", gemm=gemm, autotune=True) \
        if args.autotune else None
    models = [m for m in (fused, off, tuned) if m is not None]
    inputs = _inputs(torch, fused, _parse(source))
    ref = peer(*inputs)
    tol = tolerance(args.dtype, TOLERANCE)
    status = [_check(torch, m(*inputs), ref, tol) for m in models]
    if args.reference:
        status = [f"{s}, {_check_reference(source, m, inputs)}"
                  for s, m in zip(status, models, strict=True)]
    times = _times(torch, fused, off, peer, inputs, args, tuned)
    checked = []
    for name, fn in (library or {}).items():
        checked.append(f"{name} {_check(torch, fn(*inputs), ref, tol)}")
        times[name] = _time_torch(torch, fn, inputs, args)
    moved, flops = floor_work(model, inputs, ref)
    floor = max(moved / copy_bw, (flops / gemm_rate) if flops == flops else 0.0)
    table = _row_table(row_name(row, args.dtype), times, floor, fused.launches, off.launches,
                       status, tuned.launches if tuned else 0, checked)
    if flops == flops:  # contractions: the achieved rate of fused fusec
        table.insert(1, f"fusec: {flops / (times['fusec'] * 1e-3) / 1e12:.1f} TFLOP/s")
    return table


def _measure_program(row: str, fusec: Any, torch: Any, args: Any, copy_bw: float,
                     gemm_rate: float) -> list[str]:
    """Check and time one program of bench/programs against its torch peer."""
    from torch_peer import floor_work as program_floor
    from torch_peer import torch_peer

    from fusec.compiler.parsing import make_context, parse_module
    from fusec.reference.interpreter import find_function

    path = HERE / "programs" / f"{row}.mlir"
    source = retype(path.read_text(encoding="utf-8"), args.dtype)
    func = find_function(parse_module(make_context(), source, str(path)), None)
    peer = torch_peer(func)
    fused = fusec.compile(source, fusion=True, device="gpu")
    off = fusec.compile(source, fusion=False, device="gpu")
    tuned = fusec.compile(source, fusion=True, device="gpu", autotune=True) \
        if args.autotune else None
    models = [m for m in (fused, off, tuned) if m is not None]
    inputs = _inputs(torch, fused, func)
    ref = _as_list(peer(*inputs))
    tol = tolerance(args.dtype, TOLERANCE)
    status = [_check_all(torch, _as_list(m(*inputs)), ref, tol) for m in models]
    if args.reference:
        status = [f"{s}, {_check_reference(source, m, inputs)}"
                  for s, m in zip(status, models, strict=True)]
    times = _times(torch, fused, off, peer, inputs, args, tuned)
    moved, flops = program_floor(func, inputs, ref)
    floor = max(moved / copy_bw, (flops / gemm_rate) if flops == flops else 0.0)
    return _row_table(row_name(row, args.dtype), times, floor, fused.launches, off.launches,
                      status, tuned.launches if tuned else 0)


def _times(torch: Any, fused: Any, off: Any, peer: Any, inputs: list[Any],
           args: Any, tuned: Any = None) -> dict[str, float]:
    """Median ms per call of fusec fused (the model's schedules, and
    autotuned with --autotune) and unfused, torch eager and (unless
    --no-compile) torch.compile, on the same inputs."""
    times = {"fusec": _time_fusec(torch, fused, inputs, args)}
    if tuned is not None:
        times["fusec autotuned"] = _time_fusec(torch, tuned, inputs, args)
    times |= {
        "fusion off": _time_fusec(torch, off, inputs, args),
        "torch eager": _time_torch(torch, peer, inputs, args),
    }
    if not args.no_compile:
        times["torch.compile"] = _time_torch(torch, _inductor(torch, peer), inputs, args)
    return times


def _inductor(torch: Any, fn: Any) -> Any:
    """`torch.compile(fn)` with dynamo's caches emptied first: every program's
    peer is the same Python function (bench/torch_peer.py) with other
    closures, and past dynamo's recompile limit it would silently run eager."""
    torch._dynamo.reset()
    return torch.compile(fn)


def _as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, tuple | list) else [out]


def _check_all(torch: Any, outs: list[Any], refs: list[Any], tol: float = TOLERANCE) -> str:
    results = [_check(torch, o, r, tol) for o, r in zip(outs, refs, strict=True)]
    bad = [r for r in results if r != "ok"]
    return bad[0] if bad else "ok"


def _ceilings(torch: Any, dtype: str = "f32") -> tuple[float, float]:
    """Measured device-to-device copy bandwidth (bytes read + written per
    second) and cuBLAS rate (flop/s) in `dtype` (TF32 off for f32)."""
    src = torch.randn(1 << 28, device="cuda")
    dst = torch.empty_like(src)
    ms = _events(torch, lambda: dst.copy_(src), 20, 7)
    kind = getattr(torch, element(dtype).torch_name)
    a = torch.randn(4096, 4096, device="cuda").to(kind)
    b = torch.randn(4096, 4096, device="cuda").to(kind)
    gms = _events(torch, lambda: a @ b, 10, 5)
    return 2 * src.numel() * 4 / (ms * 1e-3), 2 * 4096**3 / (gms * 1e-3)


def _events(torch: Any, fn: Any, iters: int, repeat: int) -> float:
    """Median milliseconds per call of `fn` on torch's current stream."""
    for _ in range(3):
        fn()
    samples = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / iters)
    return statistics.median(samples)


def _time_torch(torch: Any, fn: Any, inputs: list[Any], args: Any) -> float:
    return _events(torch, lambda: fn(*inputs), args.iters, args.repeat)


def _time_fusec(torch: Any, model: Any, inputs: list[Any], args: Any) -> float:
    """Median ms per `model(*inputs)` call, the path a user's call takes
    (device inputs read in place, CUDA-graph replay unless the model was
    compiled without graphs, a fresh output from the caller's allocator),
    timed like the torch peers: events on torch's current stream, which is
    the stream fusec runs a torch caller's call on.

    Timing the executor's `launch` instead counts its Python argument
    handling (tens of microseconds per array), which a graph replay does not
    pay: that host time, not the kernels, was what such a timing measured
    for programs whose kernels run under ~0.2 ms."""
    return _events(torch, lambda: model(*inputs), args.iters, args.repeat)


def _inputs(torch: Any, model: Any, func: Any, device: str = "cuda") -> list[Any]:
    """The row's inputs, seeded: floats from N(0, 1) in the input's type,
    times 1/sqrt(K) for a matmul's right operand (K its contracted size, as
    weights are initialised, so that activations stay near 1 and half
    precision does not overflow); integers uniform in [0, bound), bound the
    smallest size of the table axis among the `nn.gather`s they index (so
    every index is valid), else the reference's DEFAULT_INDEX_BOUND
    (`reference.interpreter.index_bounds`)."""
    from fusec.reference.interpreter import index_bounds

    gen = torch.Generator(device=device).manual_seed(0)
    fp = model.signature
    inputs = []
    scales = _weight_scales(func)
    for v, high, scale in zip(fp.inputs, index_bounds(func), scales, strict=True):
        shape, dtype = fp.values[v].shape, torch_dtype(torch, fp.values[v].dtype)
        if high is None:
            x = torch.randn(shape, device=device, generator=gen)
            inputs.append((x * scale if scale != 1.0 else x).to(dtype))
        else:
            inputs.append(torch.randint(0, high, shape, device=device, generator=gen,
                                        dtype=dtype))
    return inputs


def _weight_scales(func: Any) -> list[float]:
    """Per argument of `func`: 1/sqrt(K) when it is the right operand of an
    `nn.matmul` (K: its second-to-last size), else 1."""
    from fusec.dialects import nn
    from fusec.dialects.nn_base import tensor_shape

    scales = []
    for arg in func.body.block.args:
        ks = [tensor_shape(arg)[-2] for use in arg.uses
              if isinstance(use.operation, nn.MatmulOp) and use.index == 1
              and len(tensor_shape(arg)) >= 2]
        scales.append(1.0 / max(ks) ** 0.5 if ks else 1.0)
    return scales


def _parse(source: str) -> Any:
    """The public function of a model's text."""
    from fusec.compiler.parsing import make_context, parse_module
    from fusec.reference.interpreter import find_function

    return find_function(parse_module(make_context(), source, "model.mlir"), None)


def _check_reference(source: str, model: Any, inputs: list[Any]) -> str:
    """fusec's outputs against the float64 reference interpreter, with the
    tolerance `fusec run --check` uses (bf16's for bf16 outputs)."""

    from fusec.compiler.parsing import make_context, parse_module
    from fusec.compiler.run_command import compare
    from fusec.reference.interpreter import find_function, run_function

    func = find_function(parse_module(make_context(), source, "model.mlir"), None)
    host = [host_array(t) for t in inputs]
    expected = run_function(func, host)
    got = model(*inputs)
    outs = list(got) if isinstance(got, tuple) else [got]
    results = [compare(host_array(o), r, "bfloat16" if "bfloat16" in str(o.dtype) else None)
               for o, r in zip(outs, expected, strict=True)]
    ok = all(passed for passed, _ in results)
    return "reference ok" if ok else "reference MISMATCH: " + "; ".join(m for _, m in results)


def _check(torch: Any, out: Any, ref: Any, tol: float = TOLERANCE) -> str:
    err = (out.float() - ref.float()).abs().max().item()
    scale = max(ref.float().abs().max().item(), 1e-30)
    return "ok" if err <= tol * scale else f"MISMATCH (max err {err:.3g})"


def _header(torch: Any, copy_bw: float, gemm_rate: float,
            title: str = "fusec benchmarks", dtype: str = "f32") -> list[str]:
    dev = torch.cuda.get_device_name()
    commit = os.environ.get("FUSEC_COMMIT", "unknown")
    return [
        f"# {title}: {dev}, {datetime.date.today().isoformat()}, commit {commit}",
        "",
        f"Measured in this run: device-to-device copy {copy_bw / 1e12:.2f} TB/s "
        f"(read + write); cuBLAS {_rate_name(dtype)} {gemm_rate / 1e12:.1f} TFLOP/s"
        + (" (TF32 off)." if dtype == "f32" else "."),
        "",
    ]


def _rate_name(dtype: str) -> str:
    """fp32, fp16 or bf16, as cuBLAS rates are named."""
    return dtype if dtype == "bf16" else f"fp{8 * element(dtype).width}"


def _row_table(row: str, times: dict[str, float], floor: float, launches: int,
               off_launches: int, status: list[str], tuned_launches: int = 0,
               library: list[str] | None = None) -> list[str]:
    tuned = f", fusec autotuned {status[2]}" if len(status) > 2 else ""
    peers = "".join(f", {s}" for s in library or [])
    out = [f"## {row}  (floor {floor * 1e3:.3f} ms; fusec {status[0]}, "
           f"fusion off {status[1]}{tuned}{peers})", "",
           "| variant | time (ms) | % of floor | launches | fusec speed-up |",
           "|---|---|---|---|---|"]
    for name, ms in times.items():
        n = {"fusec": str(launches), "fusion off": str(off_launches),
             "fusec autotuned": str(tuned_launches)}.get(name, "")
        out.append(f"| {name} | {ms:.3f} | {100 * floor * 1e3 / ms:.0f}% | {n} | "
                   f"{ms / times['fusec']:.2f}x |")
    return [*out, ""]


def _write(out_dir: str, lines: list[str], torch: Any, append: bool = False,
           quiet: bool = False) -> None:
    """Write the tables to OUT/DATE-DEVICE.md; `append` adds them after what
    an earlier run of the day wrote there (bench/onnx_models.py does)."""
    path = Path(out_dir)
    path.mkdir(parents=True, exist_ok=True)
    name = torch.cuda.get_device_name().replace(" ", "_")
    target = path / f"{datetime.date.today().isoformat()}-{name}.md"
    text = "\n".join(lines) + "\n"
    if append and target.exists():
        with target.open("a", encoding="utf-8") as f:
            f.write("\n" + text)
        print(f"appended to {target}")
        return
    target.write_text(text, encoding="utf-8")
    if not quiet:
        print(f"wrote {target}")


if __name__ == "__main__":
    sys.exit(main())
