"""Fusion on is never estimated slower than fusion off: for random graphs of
the fuzzer's generator, the summed busy time of the kernels
`form-fusion-groups` forms (each priced on its emitted path, launches
included) is at most that of one kernel per op (docs/fusion.md); and so
for every program of bench/models, bench/programs and examples."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.func import FuncOp

from fusec.analysis.fusion_legality import FusionOptions, kernel_cost
from fusec.analysis.fusion_policy import get_policy
from fusec.analysis.targets import get_target
from fusec.compiler.driver import make_registry
from fusec.compiler.parsing import make_context, parse_module
from fusec.compiler.pipeline import PipelineRunner, parse_pipeline_spec
from fusec.fuzz.generate import random_graph
from fusec.passes.form_fusion_groups import GroupFormer

GRAPHS = 100


def program_times(text: str, target_name: str) -> tuple[float, float]:
    """(unfused, fused) estimated seconds of the program in `text`."""
    ctx = make_context()
    module = parse_module(ctx, text, "fuzz.mlir")
    PipelineRunner(ctx, parse_pipeline_spec(make_registry([]), "decompose")).run(module)
    target = get_target(target_name)
    options = FusionOptions(max_registers=target.max_registers_per_thread)
    unfused = fused = 0.0
    for func in [op for op in module.walk() if isinstance(op, FuncOp)]:
        former = GroupFormer(func, target, get_policy("greedy"), options)
        live = {nid for nid, g in former.info.items() if g.lead in former.dep.live}
        unfused += sum(kernel_cost(former.dep, target, former.info[n]).busy_time(target)
                       for n in live)
        former.run()
        fused += sum(kernel_cost(former.dep, target, g).busy_time(target)
                     for g in former.info.values() if any(op in former.dep.live for op in g.ops))
    return unfused, fused


def test_fused_program_is_never_estimated_slower() -> None:
    rng = np.random.default_rng(11)
    worse: list[str] = []
    for k in range(GRAPHS):
        text = random_graph(rng).text()
        for target in ("h200", "orin"):
            unfused, fused = program_times(text, target)
            if fused > unfused * (1 + 1e-9):
                worse.append(f"graph {k} on {target}: fused {fused * 1e6:.2f} us > "
                             f"unfused {unfused * 1e6:.2f} us\n{text}")
    assert not worse, "\n".join(worse[:3])


PROGRAMS = sorted(p for d in ("bench/models", "bench/programs", "examples")
                  for p in (Path(__file__).resolve().parent.parent / d).glob("*.mlir"))


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_bench_program_is_never_estimated_slower_fused(path: Path) -> None:
    """The same on every program of bench/ and examples/, on h200 (the
    target `fusec --target h200` compiles them for)."""
    unfused, fused = program_times(path.read_text(encoding="utf-8"), "h200")
    assert fused <= unfused * (1 + 1e-9), (
        f"{path.name}: fused {fused * 1e6:.2f} us > unfused {unfused * 1e6:.2f} us")
