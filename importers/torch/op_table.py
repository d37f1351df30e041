"""The ATen ops fusec translates: overload -> translator, from the four op files.

The graphs fusec receives are decomposed to PyTorch's core ATen op set
(`torch._decomp.core_aten_decompositions()`), so this table is short; an op
not in it runs in PyTorch (`torch.compile`) or is an error naming the node
(`fusec import model.pt2`).
"""

from __future__ import annotations

from typing import Any

from fusec.importers.torch import ops_layout, ops_pointwise, ops_statistics, ops_structured
from fusec.importers.torch.context import Translator

TRANSLATORS: dict[Any, Translator] = {
    **ops_pointwise.TRANSLATORS,
    **ops_structured.TRANSLATORS,
    **ops_statistics.TRANSLATORS,
    **ops_layout.TRANSLATORS,
}
"""Every translated ATen overload -> its translator."""

MULTI_OUTPUT_USED = ops_structured.MULTI_OUTPUT_USED
"""Multi-output ops and the output positions that are translated."""


def supported_ops() -> list[str]:
    """The translated overloads by name (`aten.addmm.default`, ...), sorted."""
    return sorted(str(op) for op in TRANSLATORS)
