"""What autotuning found for one group (`compiler/autotune.py`): each
variant's candidates with their measured times (`Tuned`) and the group's
fused-against-split outcome (`GroupTuning`), whether timed now or read from
the tuning cache (`compiler/tuning_entry.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fusec.compiler.tuning_decision import choose
from fusec.dialects.schedule import ScheduleAttr


@dataclass
class Tuned:
    """One group's (or split part's) candidates (the model's first), their
    median times and samples per repeat, and which one is kept (`decide`)."""

    schedules: list[ScheduleAttr | None]
    times: list[float]
    est_us: float = 0.0
    samples: list[list[float]] = field(default_factory=list[list[float]])
    chosen: int = 0
    fastest: int = 0

    def decide(self, margin: float) -> None:
        """Keep the fastest candidate only if it beats the model's choice by
        more than `margin` (`compiler/tuning_decision.py`)."""
        choice = choose(self.samples or [[t] for t in self.times], margin)
        self.chosen, self.fastest = choice.chosen, choice.fastest

    @property
    def best(self) -> int:
        """The candidate kept."""
        return self.chosen

    @property
    def kept_for_noise(self) -> bool:
        """Another candidate was fastest, but within the noise margin."""
        return self.chosen == 0 and self.fastest != 0


@dataclass
class GroupTuning:
    """What autotuning found for one group of the model."""

    group: str
    fused: Tuned
    from_cache: bool
    contest: str = ""
    parts: list[Tuned] = field(default_factory=list[Tuned])
    split: bool = False
    part_names: list[str] = field(default_factory=list[str])

    @property
    def fused_us(self) -> float:
        """The measured time of the fused group's kept schedule."""
        return self.fused.times[self.fused.best]

    @property
    def split_us(self) -> float:
        """The sum of the split parts' kept schedules' times."""
        return sum(p.times[p.best] for p in self.parts)

    @property
    def changed(self) -> bool:
        """Whether tuning changed the model's program for this group."""
        return self.split or self.fused.best != 0


