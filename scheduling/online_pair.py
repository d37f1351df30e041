"""Which reductions of a row share one pass (`online_pair`): a softmax's max
and its sum of `exp(a - max)`, accumulated online (the method and its
kernel text: `codegen/reduction_online.py`). The row schedule decides
with it whether a row that does not stay on chip is read twice, not three
times.
"""

from __future__ import annotations

from fusec.analysis.group_body import compute_type
from fusec.analysis.reduction_passes import online_softmax_max
from fusec.dialects import nn
from fusec.scheduling.reduction_plan import RowAnalysis


def online_pair(ra: RowAnalysis) -> tuple[nn.ReduceMaxOp, nn.ReduceSumOp] | None:
    """The (max, sum) reductions that can share one pass: exactly two
    stages, one `reduce_max` of `a` in the first, and in the second one
    `reduce_sum` of `exp(a - max)`, in a float compute type; else None."""
    if ra.stages != 2 or len(ra.reductions) != 2:
        return None
    first, second = sorted(ra.reductions, key=lambda r: ra.stage[r.results[0]])
    if not isinstance(first, nn.ReduceMaxOp) or not isinstance(second, nn.ReduceSumOp):
        return None
    if not compute_type(first.results[0]).startswith("float"):
        return None
    if online_softmax_max(second) is not first:
        return None
    return first, second
