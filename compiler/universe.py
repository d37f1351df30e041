"""Makes fusec visible to stock `xdsl-opt` (entry point group `xdsl.universe`):
the `nn` and `fusion` dialects and fusec's own passes, so that
`xdsl-opt model.mlir -p decompose,form-fusion-groups` works. fusec's own
driver does not use this: it loads its dialects directly
(`compiler.parsing.make_context`) and its passes from `compiler.registry`."""

from xdsl.ir import Dialect
from xdsl.passes import ModulePass
from xdsl.universe import Universe

from fusec.compiler.builtin_passes import BUILTIN_PASSES, PassFactory


def _nn() -> Dialect:
    from fusec.dialects.nn import NN

    return NN


def _fusion() -> Dialect:
    from fusec.dialects.fusion import Fusion

    return Fusion


def _with_kinds(factory: PassFactory) -> PassFactory:
    """`factory`, registering the built-in group kinds first: `xdsl-opt`
    builds its own context (not `compiler.parsing.make_context`), and the
    passes that form, schedule or emit groups look their kinds up."""

    def load() -> type[ModulePass]:
        from fusec.scheduling.kinds import register_builtin_kinds

        register_builtin_kinds()
        return factory()

    return load


FUSEC_UNIVERSE = Universe(
    all_dialects={"nn": _nn, "fusion": _fusion},
    all_passes={name: _with_kinds(factory) for name, factory in BUILTIN_PASSES.items()},
)
