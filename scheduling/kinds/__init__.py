"""The built-in group kinds, one per module, registered with
`analysis/group_kind.register_kind` on import (the registry imports this
package on its first lookup). The order is the one error messages list."""

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

for _kind in BUILTIN_KINDS:
    register_kind(_kind)
