"""The fuzzing loop: graph `i` of seed `S` is generated in its mode
(`modes.py`), checked, triaged and, when it fails, minimized and written as a
`.mlir` file with a header saying what failed (the regression tests read the
same header).

```
// fusec fuzz: error at run-fused
// detail: TypeError: ... (kernel.py:287)
// known: item 1 (kernel names collide for long function names)
// inputs: seed=9 edges=no
// found by: python -m fusec.fuzz --mode bf16 --seed 7 --start 9 --graphs 1
```
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from fusec.fuzz.check import Outcome, check_text
from fusec.fuzz.generate import GenConfig
from fusec.fuzz.graph import Graph
from fusec.fuzz.minimize import DEFAULT_BUDGET, minimize
from fusec.fuzz.modes import mode_of
from fusec.fuzz.special import edge_kind
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
    modes: tuple[str, ...] = ("default",)  # graph i runs in modes[i % len(modes)]
    sizes: str = "small"  # the gpu mode's shapes: small (the simulator) or large
    device: str = "sim"  # where kernels run: sim, or gpu for every mode


@dataclass(frozen=True)
class Result:
    """One graph's fate."""

    index: int
    outcome: Outcome
    known: str | None = None
    path: str = ""
    mode: str = "default"

    @property
    def category(self) -> str:
        """`error run-fused item 4`, `mismatch compare-unfused new`, `ok`."""
        if not self.outcome.failed:
            return "ok"
        item = self.known or "new"
        return f"{self.outcome.status} {self.outcome.stage} {item}"


def fuzz_one(index: int, options: FuzzOptions) -> Result:
    """Generate, check and (on failure) triage, minimize and write graph `index`."""
    mode = mode_of(index, options.modes)
    if mode.check is not None:  # a mode with a check of its own
        return Result(index, mode.check(index, options.seed), mode=mode.name)
    rng = mode.rng(options.seed, index)
    graph = mode.graph(rng, mode.config(options.gen, options.sizes))
    edges = bool(rng.random() < options.edge_rate)
    kind = "special" if mode.edges == "special" else "yes" if edges else "no"
    device = options.device

    def check(g: Graph) -> Outcome:
        return check_text(g.text(), index, kind, device)

    outcome = check(graph)
    if not outcome.failed:
        return Result(index, outcome, mode=mode.name)
    known = known_item(graph.text(), outcome, index, kind, device)
    if options.minimize:
        signature = outcome.signature
        # Known bugs have reproducers already: a short search is enough.
        budget = KNOWN_BUDGET if known else DEFAULT_BUDGET
        small = minimize(graph, lambda g: check(g).signature == signature, budget)
        again = check(small)
        if again.signature == signature:  # else the failure is not deterministic: keep all
            graph, outcome = small, again
            known = known_item(graph.text(), outcome, index, kind, device)
    text = graph.text()
    path = ""
    if options.out is not None:
        options.out.mkdir(parents=True, exist_ok=True)
        item = known.replace(" ", "") if known else "new"
        stem = f"{outcome.status}-{outcome.stage}-{item}-{mode.name}-s{options.seed}-g{index}"
        target = options.out / f"{stem}.mlir"
        sizes = f" --sizes {options.sizes}" if mode.gpu else ""
        target.write_text(failure_file(text, outcome, index, kind, known,
                                       f"python -m fusec.fuzz --mode {mode.name}{sizes} "
                                       f"--seed {options.seed} --start {index} --graphs 1"),
                          encoding="utf-8")
        path = str(target)
    return Result(index, outcome, known, path, mode.name)


def failure_file(text: str, outcome: Outcome, seed: int, edges: bool | str,
                 known: str | None, origin: str) -> str:
    """A failing program with its header (`edges`: see `check_text`)."""
    known_line = f"{known} ({KNOWN_ITEMS[known]})" if known else "no"
    header = [
        f"// fusec fuzz: {outcome.status} at {outcome.stage}",
        f"// detail: {outcome.detail}",
        f"// known: {known_line}",
        f"// inputs: seed={seed} edges={edge_kind(edges)}",
        f"// found by: {origin}",
    ]
    return "\n".join(" ".join(line.split()) for line in header) + "\n" + text


_INPUTS = re.compile(r"^// inputs: seed=(\d+) edges=(yes|no|special)$", re.M)
_XFAIL = re.compile(r"^// xfail: (.+)$", re.M)


def read_header(text: str) -> tuple[int, str, str | None]:
    """(input seed, edge values: no, yes or special, why it is expected to
    fail or None) from a regression file: `// xfail: item 4` names an item
    of `triage.KNOWN_ITEMS`."""
    match = _INPUTS.search(text)
    if match is None:
        raise ValueError("no '// inputs: seed=N edges=yes|no|special' line")
    xfail = _XFAIL.search(text)
    return int(match.group(1)), match.group(2), xfail.group(1) if xfail else None
