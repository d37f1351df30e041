"""What `register-budget` may do with a group over the register budget, by
default: nothing leaner (the group is split, capped or kept as it is), and a
split may pass any value between its stages through memory. Kinds with a
leaner schedule (contraction, window), stricter splits (reduction) or a
schedule already sized for the budget (attention) override it."""

from __future__ import annotations

from xdsl.ir import SSAValue

from fusec.analysis.group_kind import Leaner
from fusec.analysis.targets import Target
from fusec.dialects.fusion import GroupOp


class SplitOverBudget:
    """`GroupKind`'s `sized_for_budget`, `leaner`, `leanest` and
    `may_cross_split` for a kind with a single schedule."""

    sized_for_budget: bool = False

    def leaner(self, group: GroupOp, budget: int, target: Target) -> Leaner | None:
        """None: no other schedule of the same group; over the budget it is split."""
        return None

    def leanest(self, group: GroupOp, target: Target) -> Leaner | None:
        """None: with no split point it is kept as it is."""
        return None

    def may_cross_split(self, group: GroupOp, cross: list[SSAValue]) -> bool:
        """Any value: each stage reads what the one before wrote."""
        return True
