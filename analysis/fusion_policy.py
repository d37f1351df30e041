"""Fusion policy: which legal fusions are wanted, and in which order to try them.

Legality (`fusion_legality`) says what *may* fuse; a policy says what *should*,
kept separate and pluggable as MLIR's Linalg fusion recommends (its control
function) and as TorchInductor keeps `score_fusion` apart from `can_fuse`.

```python
from fusec.analysis.fusion_policy import get_policy
policy = get_policy("greedy")          # bytes saved first; vertical and horizontal
ranked = policy.order(candidates)      # most bytes saved first, then program order
policy.wants(candidate, verdict)       # a Verdict: yes, or why the policy declines
```

Add a policy by subclassing `FusionPolicy` and registering it in `POLICIES`;
`form-fusion-groups{policy=NAME}` selects it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fusec.analysis.diagnostics import FusecError
from fusec.analysis.fusion_legality import Candidate, Verdict


def candidate_bytes(c: Candidate) -> int:
    """Bytes the fusion keeps out of DRAM at most: the values passed between
    the two groups (vertical) or the input they share (horizontal)."""
    if c.relation == "horizontal":
        return sum(map(c.dep.nbytes, c.a.inputs & c.b.inputs))
    edges = [*c.edges(c.a, c.b), *c.edges(c.b, c.a)]
    return sum(map(c.dep.nbytes, edges))


class FusionPolicy:
    """Orders candidates and decides whether a legal fusion is wanted."""

    name = "base"
    horizontal = True

    def order(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """Try order; the base policy keeps program order."""
        return list(candidates)

    def wants(self, c: Candidate, verdict: Verdict) -> Verdict:
        """`verdict` is the legal fusion's (with its gain); say yes or why not."""
        return Verdict.yes(verdict.gain)


@dataclass(frozen=True)
class GreedyPolicy(FusionPolicy):
    """Bytes saved first (ties: the earlier group), every legal fusion with
    `dT >= 0` is taken; `horizontal` also merges siblings sharing an input."""

    name: str = "greedy"
    horizontal: bool = True
    min_saved_bytes: int = 0

    def order(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        def key(c: Candidate) -> tuple[int, int]:
            first = min(c.dep.index[c.a.lead], c.dep.index[c.b.lead])
            return (-candidate_bytes(c), first)

        return sorted(candidates, key=key)

    def wants(self, c: Candidate, verdict: Verdict) -> Verdict:
        saved = candidate_bytes(c)
        if saved < self.min_saved_bytes:
            return Verdict.no(
                f"policy '{self.name}' wants at least {self.min_saved_bytes} bytes saved, "
                f"this saves {saved}", verdict.gain)
        return Verdict.yes(verdict.gain)


@dataclass(frozen=True)
class NoFusionPolicy(FusionPolicy):
    """Declines every fusion: each op stays its own kernel (a baseline)."""

    name: str = "none"
    horizontal: bool = False

    def wants(self, c: Candidate, verdict: Verdict) -> Verdict:
        return Verdict.no("policy 'none' declines every fusion", verdict.gain)


POLICIES: dict[str, FusionPolicy] = {
    "greedy": GreedyPolicy(),
    "vertical": GreedyPolicy(name="vertical", horizontal=False),
    "none": NoFusionPolicy(),
}
"""Policies by name, as `form-fusion-groups{policy=...}` spells them."""


def get_policy(name: str) -> FusionPolicy:
    """The policy called `name`, or a `FusecError` listing the known ones."""
    if name not in POLICIES:
        raise FusecError(f"unknown fusion policy '{name}'; known: {', '.join(POLICIES)}")
    return POLICIES[name]
