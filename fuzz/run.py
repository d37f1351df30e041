"""The fuzzing loop: graph `i` of seed `S` is generated, checked, triaged and,
when it fails, minimized and written as a `.mlir` file with a header saying
what failed (the regression tests read the same header).

```
// fusec fuzz: error at run-fused
// detail: TypeError: ... (kernel.py:287)
// known: item 1 (kernel names collide for long function names)
// inputs: seed=9 edges=no
// found by: python -m fusec.fuzz --seed 7 (graph 9)
```
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fusec.fuzz.check import Outcome, check_text
from fusec.fuzz.generate import GenConfig, random_graph
from fusec.fuzz.minimize import DEFAULT_BUDGET, minimize
from fusec.fuzz.triage import KNOWN_ITEMS, known_item

KNOWN_BUDGET = 25  # minimizing checks spent on an instance of a known item


@dataclass(frozen=True)
class FuzzOptions:
    """What the long mode varies (`python -m fusec.fuzz --help`)."""

    seed: int = 0
    edge_rate: float = 0.15  # programs whose inputs get 0, -1, inf or NaN elements
    minimize: bool = True
    out: Path | None = None
    gen: GenConfig = field(default_factory=GenConfig)


@dataclass(frozen=True)
class Result:
    """One graph's fate."""

    index: int
    outcome: Outcome
    known: str | None = None
    path: str = ""

    @property
    def category(self) -> str:
        """`error run-fused item 4`, `mismatch compare-unfused new`, `ok`."""
        if not self.outcome.failed:
            return "ok"
        item = self.known or "new"
        return f"{self.outcome.status} {self.outcome.stage} {item}"


def fuzz_one(index: int, options: FuzzOptions) -> Result:
    """Generate, check and (on failure) triage, minimize and write graph `index`."""
    rng = np.random.default_rng([options.seed, index])
    graph = random_graph(rng, options.gen)
    edges = bool(rng.random() < options.edge_rate)
    outcome = check_text(graph.text(), index, edges)
    if not outcome.failed:
        return Result(index, outcome)
    known = known_item(graph.text(), outcome, index, edges)
    if options.minimize:
        signature = outcome.signature
        # Known bugs have reproducers already: a short search is enough.
        budget = KNOWN_BUDGET if known else DEFAULT_BUDGET
        small = minimize(graph, lambda g: check_text(g.text(), index, edges).signature
                         == signature, budget)
        again = check_text(small.text(), index, edges)
        if again.signature == signature:  # else the failure is not deterministic: keep all
            graph, outcome = small, again
            known = known_item(graph.text(), outcome, index, edges)
    text = graph.text()
    path = ""
    if options.out is not None:
        options.out.mkdir(parents=True, exist_ok=True)
        item = known.replace(" ", "") if known else "new"
        stem = f"{outcome.status}-{outcome.stage}-{item}-s{options.seed}-g{index}"
        target = options.out / f"{stem}.mlir"
        target.write_text(failure_file(text, outcome, index, edges, known,
                                       f"python -m fusec.fuzz --seed {options.seed} "
                                       f"(graph {index})"), encoding="utf-8")
        path = str(target)
    return Result(index, outcome, known, path)


def failure_file(text: str, outcome: Outcome, seed: int, edges: bool, known: str | None,
                 origin: str) -> str:
    """A failing program with its header."""
    known_line = f"{known} ({KNOWN_ITEMS[known]})" if known else "no"
    header = [
        f"// fusec fuzz: {outcome.status} at {outcome.stage}",
        f"// detail: {outcome.detail}",
        f"// known: {known_line}",
        f"// inputs: seed={seed} edges={'yes' if edges else 'no'}",
        f"// found by: {origin}",
    ]
    return "\n".join(" ".join(line.split()) for line in header) + "\n" + text


_INPUTS = re.compile(r"^// inputs: seed=(\d+) edges=(yes|no)$", re.M)
_XFAIL = re.compile(r"^// xfail: (.+)$", re.M)


def read_header(text: str) -> tuple[int, bool, str | None]:
    """(input seed, edge values?, why it is expected to fail or None) from a
    regression file: `// xfail: item 4` names an item of issue 10."""
    match = _INPUTS.search(text)
    if match is None:
        raise ValueError("no '// inputs: seed=N edges=yes|no' line")
    xfail = _XFAIL.search(text)
    return int(match.group(1)), match.group(2) == "yes", xfail.group(1) if xfail else None
