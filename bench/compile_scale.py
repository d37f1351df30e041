"""Compile-time scaling: the stages of `decompose,form-fusion-groups`, then the
whole compile job (parse, verify, passes, code generation, memory plan,
report, printing; numba's JIT is not involved) on generated graphs of 1k, 2k,
5k and 10k ops (CPU only).

    python -m fusec.bench.compile_scale            # the table
    python -m fusec.bench.compile_scale 20000      # other sizes

The generated graph mixes what real models have: elementwise chains,
residual adds reaching back a few ops (and now and then far back), softmax
rows (reduce_max / sub / exp / reduce_sum / div) and matmuls against weight
arguments, all over 64x64 tensors, so every fusion pattern and refusal
(contraction boundaries, cycles through reductions) occurs throughout.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from dataclasses import dataclass

from fusec.compiler.compile import compile_model
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.verify import verify_module
from fusec.dialects.fusion import GroupOp
from fusec.passes.decompose import DecomposePass
from fusec.passes.form_fusion_groups import FormFusionGroupsPass

T = "tensor<64x64xf32>"
ROW = "tensor<64x1xf32>"
UNARY = ("nn.exp", "nn.tanh", "nn.relu", "nn.neg", "nn.sigmoid")


def generate(n_ops: int, seed: int = 0) -> str:
    """An `nn` function of about `n_ops` ops (one per line)."""
    rng = random.Random(seed)
    lines: list[str] = []
    values = ["%x"]

    def emit(text: str, full: bool = True) -> str:
        name = f"%v{len(lines)}"
        lines.append(f"  {name} = {text}")
        if full:  # row values ([64, 1]) are read only inside their softmax
            values.append(name)
        return name

    def recent() -> str:
        if rng.random() < 0.05:
            return rng.choice(values)
        return rng.choice(values[-6:])

    while len(lines) < n_ops:
        r = rng.random()
        if r < 0.55:
            emit(f"{rng.choice(UNARY)} {values[-1]} : {T}")
        elif r < 0.80:
            emit(f"nn.add {values[-1]}, {recent()} : ({T}, {T}) -> {T}")
        elif r < 0.95:
            x = values[-1]
            m = emit(f"nn.reduce_max {x} {{axes = [1], keepdims = true}} : ({T}) -> {ROW}", False)
            d = emit(f"nn.sub {x}, {m} : ({T}, {ROW}) -> {T}")
            e = emit(f"nn.exp {d} : {T}")
            s = emit(f"nn.reduce_sum {e} {{axes = [1], keepdims = true}} : ({T}) -> {ROW}",
                     False)
            emit(f"nn.div {e}, {s} : ({T}, {ROW}) -> {T}")
        else:
            emit(f"nn.matmul {values[-1]}, %w : ({T}, {T}) -> {T}")
    body = "\n".join(lines)
    return (f"func.func @scale(%x: {T}, %w: {T}) -> {T} {{\n{body}\n"
            f"  func.return {values[-1]} : {T}\n}}\n")


@dataclass(frozen=True)
class Timing:
    """Seconds per stage for one generated graph."""

    ops: int
    parse: float
    decompose: float  # the pass plus the verification after it
    form: float  # form-fusion-groups alone
    verify: float  # verifying the grouped module
    groups: int
    job: float  # the whole compile job, `compile_model`
    job_cpu: float  # its CPU time: what other jobs on the machine do not inflate


def time_compile(n_ops: int) -> Timing:
    """Time each stage of `decompose,form-fusion-groups` on a graph of `n_ops`."""
    text = generate(n_ops)
    ctx = make_context()
    clock = time.perf_counter
    t0 = clock()
    module = parse_module(ctx, text, f"scale{n_ops}.mlir")
    t1 = clock()
    DecomposePass().apply(ctx, module)
    verify_module(module)
    t2 = clock()
    FormFusionGroupsPass().apply(ctx, module)
    t3 = clock()
    verify_module(module)
    t4 = clock()
    groups = sum(1 for op in module.walk() if isinstance(op, GroupOp))
    t5, c5 = clock(), time.process_time()
    compile_model(text, target="h200")
    job, job_cpu = clock() - t5, time.process_time() - c5
    return Timing(n_ops, t1 - t0, t2 - t1, t3 - t2, t4 - t3, groups, job, job_cpu)


def build_parser() -> argparse.ArgumentParser:
    """`python -m fusec.bench.compile_scale [SIZES...]`."""
    p = argparse.ArgumentParser(
        allow_abbrev=False,
        prog="python -m fusec.bench.compile_scale",
        description="Compile time of generated graphs, by stage (CPU only).")
    p.add_argument("sizes", nargs="*", type=int, metavar="OPS",
                   help="graph sizes in ops (default: 1000 2000 5000 10000)")
    return p


def main(argv: list[str]) -> int:
    """Print the table for the sizes of `argv`; a bad argument exits with usage."""
    sizes = build_parser().parse_args(argv).sizes or [1000, 2000, 5000, 10000]
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print("| ops | groups | parse (s) | decompose + verify (s) | form-fusion-groups (s) "
          "| verify (s) | whole compile job (s) | its CPU time (s) | CPU per 1k ops (s) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in sizes:
        t = time_compile(n)
        print(f"| {n} | {t.groups} | {t.parse:.2f} | {t.decompose:.2f} | {t.form:.2f} "
              f"| {t.verify:.2f} | {t.job:.2f} | {t.job_cpu:.2f} "
              f"| {t.job_cpu / n * 1000:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
