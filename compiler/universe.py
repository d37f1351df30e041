"""Makes fusec visible to stock `xdsl-opt` (entry point group `xdsl.universe`):
the `nn` and `fusion` dialects and fusec's own passes, so that
`xdsl-opt model.mlir -p decompose,form-fusion-groups` works. fusec's own
driver does not use this: it loads its dialects directly
(`compiler.parsing.make_context`) and its passes from `compiler.registry`."""

from collections.abc import Callable

from xdsl.ir import Dialect
from xdsl.passes import ModulePass
from xdsl.universe import Universe

from fusec.compiler.registry import BUILTIN_PASSES


def _nn() -> Dialect:
    from fusec.dialects.nn import NN

    return NN


def _fusion() -> Dialect:
    from fusec.dialects.fusion import Fusion

    return Fusion


def _pass(target: str) -> Callable[[], type[ModulePass]]:
    def load() -> type[ModulePass]:
        import importlib

        module, cls = target.split(":")
        return getattr(importlib.import_module(module), cls)

    return load


FUSEC_UNIVERSE = Universe(
    all_dialects={"nn": _nn, "fusion": _fusion},
    all_passes={name: _pass(target) for name, target in BUILTIN_PASSES.items()},
)
