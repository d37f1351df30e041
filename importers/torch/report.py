"""What the backend did with one graph: its parts (fusec's partitions and the
nodes PyTorch runs), the remarks, and why each node left to PyTorch is there
(`backend.py` fills it; `fusec.torch.reports()` keeps the last ones)."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any


@dataclass
class PartitionInfo:
    """One part of a graph: run by fusec (`launches` kernel launches per
    call) or by PyTorch (`launches` is None)."""

    name: str
    nodes: list[str]
    launches: int | None
    text: str = ""
    """The `nn` module fusec compiled (empty for PyTorch parts)."""
    model: Any = None
    """The `fusec.CompiledModel` (None for PyTorch parts)."""


@dataclass(frozen=True)
class Fallback:
    """Why PyTorch runs one FX node: its op (`aten.cumsum.default`) and the reason."""

    op: str
    reason: str


# The reasons of nodes PyTorch runs although fusec translates them.
CONSTANTS_ONLY = "in a partition of constants only (PyTorch computes it once per call)"
GLUE_OUTSIDE = "glue (a view or an output pick), outside every fusec partition"
LEFT_OUTSIDE = "translated, but outside every fusec partition"


@dataclass
class GraphReport:
    """What the backend did with one graph Dynamo handed it."""

    partitions: list[PartitionInfo] = field(default_factory=list)
    remarks: list[str] = field(default_factory=list)
    glue: list[str] = field(default_factory=list)
    """The nodes PyTorch runs that are glue (`partition.is_glue`), by name."""
    fallbacks: dict[str, Fallback] = field(default_factory=dict)
    """Every node PyTorch runs, by name: its op and why (`fallback:` remarks
    say the same for the nodes fusec cannot translate)."""

    def fallbacks_by_op(self) -> list[tuple[str, int, str]]:
        """(op, nodes, the first node's reason) of the nodes PyTorch runs,
        most nodes first."""
        counts = collections.Counter(f.op for f in self.fallbacks.values())
        first: dict[str, str] = {}
        for f in self.fallbacks.values():
            first.setdefault(f.op, f.reason)
        return [(op, n, first[op]) for op, n in counts.most_common()]

    @property
    def fused_nodes(self) -> list[str]:
        """The FX nodes fusec runs, by name."""
        return [n for p in self.fusec_partitions for n in p.nodes]

    @property
    def compute_fallbacks(self) -> list[str]:
        """The FX nodes PyTorch runs that are not glue: the ones that cost."""
        return [n for n in self.fallback_nodes if n not in self.glue]

    def summary(self) -> str:
        """`graph: 29 nodes fused in 1 partition(s) (9 launches); 2 left to
        PyTorch (0 glue): cumsum, sort`."""
        left = self.fallback_nodes
        text = (f"graph: {len(self.fused_nodes)} nodes fused in "
                f"{len(self.fusec_partitions)} partition(s) ({self.launches} launches); "
                f"{len(left)} left to PyTorch ({len(self.glue)} glue)")
        compute = self.compute_fallbacks
        if compute:
            shown = ", ".join(compute[:8]) + (", ..." if len(compute) > 8 else "")
            text += f": {shown}"
        return text

    @property
    def fusec_partitions(self) -> list[PartitionInfo]:
        """The parts fusec runs."""
        return [p for p in self.partitions if p.launches is not None]

    @property
    def fallback_nodes(self) -> list[str]:
        """The FX nodes PyTorch runs, by name."""
        return [n for p in self.partitions if p.launches is None for n in p.nodes]

    @property
    def launches(self) -> int:
        """fusec kernel launches per call, over all its parts."""
        return sum(p.launches or 0 for p in self.partitions)
