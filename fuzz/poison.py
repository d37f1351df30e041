"""The rounds shared by the poison modes (`poison_tuning.py`,
`poison_kernels.py`): restore a cache's sound entries, poison one at random,
compile and check, and tag the first failure with the entry and the poison."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from fusec.fuzz.check import Outcome

# (round index, the entry to poison) -> (what was done to it, the round's outcome)
Round = Callable[[int, Path], tuple[str, Outcome]]


def poison_rounds(entries: Mapping[Path, bytes], count: int, rng: np.random.Generator,
                  one_round: Round) -> Outcome:
    """`count` rounds (none without entries): every entry written back as it
    was, one drawn from `rng` handed to `one_round`; ok, or the first failure
    with `[entry NAME: WHAT]` appended to its detail."""
    for i in range(count if entries else 0):
        for path, data in entries.items():
            path.write_bytes(data)
        path = list(entries)[int(rng.integers(len(entries)))]
        what, problem = one_round(i, path)
        if problem.failed:
            return Outcome(problem.status, problem.stage,
                           f"{problem.detail} [entry {path.name}: {what}]")
    return Outcome("ok")
