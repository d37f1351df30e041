"""The register estimate against ptxas on a corpus of random programs.

`tests/register_corpus/seedNNN.mlir` are programs of the fuzzer's generator
(`fusec.fuzz.generate.random_graph`, `GenConfig(max_ops=8, max_dim=12)`,
`numpy.random.default_rng(NNN)`), kept as files so that changes to the
generator do not change the corpus. They were not used to fit the model
(seeds 100-199 and the examples were; `scheduling/register_model.py`). Each
compiles with the default pipeline (register-budget on estimates alone, so
the estimate is what is measured), and each group's kernel is counted by
`ptxas -arch=sm_90 -v` through `codegen/kernel_probe.py`.

Regenerate a file with:

```python
from numpy.random import default_rng
from fusec.fuzz.generate import GenConfig, random_graph
print(random_graph(default_rng(7), GenConfig(max_ops=8, max_dim=12)).text())
```
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.targets import get_target
from fusec.codegen.kernel_probe import KernelProbe
from fusec.compiler.compile import compile_model
from fusec.compiler.compile_pipeline import PipelineOptions, default_pipeline
from fusec.compiler.driver import make_registry
from fusec.dialects.fusion import GroupOp
from fusec.passes.register_budget import recorded_estimate

CORPUS = Path(__file__).resolve().parent / "register_corpus"
TOLERANCE = 0.25
REQUIRED = 0.90  # of the corpus's kernels within TOLERANCE
MIN_KERNELS = 60


def corpus_rows() -> list[str]:
    """`file kind: est E, ptxas R (+x%)` per kernel of the corpus."""
    spec = default_pipeline(make_registry([]), PipelineOptions(target="h200")).replace(
        "register-budget{", "register-budget{ptxas=false ")
    probe, h200 = KernelProbe(budget_s=math.inf), get_target("h200")  # every kernel counted
    rows: list[str] = []
    for path in sorted(CORPUS.glob("*.mlir")):
        try:
            art = compile_model(path, target="h200", pipeline=spec)
        except FusecError:  # a program with no kernel to generate (a gap, not this test's)
            continue
        for group in [op for op in art.module.walk() if isinstance(op, GroupOp)]:
            est = recorded_estimate(group)
            if est == 0:  # a library GEMM: no kernel
                continue
            count = probe.count(group, h200)
            if count is None:
                pytest.skip(f"no ptxas count: {probe.note}")
            kind = getattr(group.attributes.get("kind"), "data", "?")
            err = (est - count.registers) / count.registers
            rows.append(f"{path.stem} {kind}: est {est}, ptxas {count.registers} ({err:+.0%})")
    return rows


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed (CUDA toolkit)")
@pytest.mark.slow
def test_estimate_within_25_percent_of_ptxas_on_90_percent_of_the_corpus() -> None:
    rows = corpus_rows()
    assert len(rows) >= MIN_KERNELS, rows
    off = [r for r in rows if abs(int(r.rsplit("(", 1)[1].rstrip("%)"))) > TOLERANCE * 100]
    share = 1 - len(off) / len(rows)
    assert share >= REQUIRED, "\n".join(
        [f"{share:.0%} of {len(rows)} kernels within 25% of ptxas; off:", *off])
