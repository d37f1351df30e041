"""The built-in group kinds, one per module. `register_builtin_kinds` adds
them to the registry of `analysis/group_kind.py`, which sits below this layer
and so cannot load them itself: `compiler.parsing.make_context` and the
`xdsl-opt` universe call it. The order is the one error messages list."""

from fusec.analysis.group_kind import register_kind
from fusec.scheduling.kinds.attention import AttentionKind
from fusec.scheduling.kinds.contraction import ContractionKind
from fusec.scheduling.kinds.layout import LayoutKind
from fusec.scheduling.kinds.pointwise import PointwiseKind
from fusec.scheduling.kinds.reduction import ReductionKind
from fusec.scheduling.kinds.window import WindowKind

BUILTIN_KINDS = (PointwiseKind(), LayoutKind(), ReductionKind(), ContractionKind(),
                 WindowKind(), AttentionKind())
"""One instance of each built-in kind, in registration order."""


def register_builtin_kinds() -> None:
    """Add every built-in kind to the group-kind registry; calling it again
    changes nothing."""
    for kind in BUILTIN_KINDS:
        register_kind(kind)
