"""What autotuning keeps, given noisy times (`compiler/autotune.py`,
`compiler/whole_call.py`).

The model's choice is the default: it needs no measurement to reproduce and
is what a compile without `--autotune` gives. A measured alternative
replaces it only when it is faster by more than `NOISE_MARGIN`, judged on
the median over the repeats of the paired ratio alternative / model (the
repeats are interleaved, so sample r of each was taken at about the same
moment and drift cancels in the ratio).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

NOISE_MARGIN = 0.03
"""A candidate must be more than 3% faster than the model's choice to replace
it, and a tuned program more than 3% slower than the model's as a whole call
to be given up. Timings of the same kernel differ from repeat to repeat and
from run to run (clocks and temperature, where blocks land on the SMs, what
else the GPU does); a difference inside that spread is as likely noise as a
gain, and taking the minimum anyway can replace the model's choice by a
worse one: on the H200 (2026-12-01) the tuned softmax and bcast_two_outputs rows,
one kernel each, were 9% and 27% slower as whole calls than the model's.
3% is meant to sit above the spread of medians of interleaved ~1 ms event
batches and below gains worth a different schedule. It is a judgement, not
a measurement: the
samples behind every decision are kept in the tuning cache entries, from
which the spread on a device can be read to revisit it
(`AutotuneOptions.noise_margin`)."""


def ratio(model: Sequence[float], other: Sequence[float]) -> float:
    """`other`'s time over `model`'s: the median of the per-repeat ratios
    when both have the same repeats (interleaved), else of the medians."""
    if len(model) == len(other) and all(m > 0 for m in model):
        return float(statistics.median(o / m for o, m in zip(other, model, strict=True)))
    base = statistics.median(model)
    return float(statistics.median(other) / base) if base > 0 else 1.0


@dataclass(frozen=True)
class Choice:
    """The candidate kept, the fastest by median, and whether the model's
    choice stayed only because the fastest was within the margin."""

    chosen: int
    fastest: int

    @property
    def kept_for_noise(self) -> bool:
        """The fastest was another candidate, but not by more than the margin."""
        return self.chosen == 0 and self.fastest != 0


def choose(samples: Sequence[Sequence[float]], margin: float = NOISE_MARGIN) -> Choice:
    """Among candidates whose samples are `samples` (candidate 0 the
    model's choice), the fastest by median of those faster than the model's
    by more than `margin` (`ratio` below 1 - margin), else the model's."""
    medians = [statistics.median(s) for s in samples]
    fastest = min(range(len(samples)), key=lambda i: (medians[i], i))
    better = [i for i in range(1, len(samples)) if ratio(samples[0], samples[i]) < 1 - margin]
    chosen = min(better, key=lambda i: (medians[i], i)) if better else 0
    return Choice(chosen, fastest)


def slower_beyond(model: Sequence[float], tuned: Sequence[float],
                  margin: float = NOISE_MARGIN) -> bool:
    """Whether `tuned` is slower than `model` by more than `margin`."""
    return ratio(model, tuned) > 1 + margin
