"""Makes the `nn` and `fusion` dialects visible to stock `xdsl-opt`
(entry point group `xdsl.universe`). fusec's own driver does not use this:
it loads its dialects directly (`compiler.parsing.make_context`)."""

from xdsl.ir import Dialect
from xdsl.universe import Universe


def _nn() -> Dialect:
    from fusec.dialects.nn import NN

    return NN


def _fusion() -> Dialect:
    from fusec.dialects.fusion import Fusion

    return Fusion


FUSEC_UNIVERSE = Universe(all_dialects={"nn": _nn, "fusion": _fusion})
