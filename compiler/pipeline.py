"""Pass pipelines: parse a `-p a,b{opt=1}` spec and run it, verifying after
every pass so a broken rewrite is caught where it happens."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError

from fusec.compiler.diagnostics import FusecError
from fusec.compiler.registry import PassRegistry
from fusec.compiler.verify import verify_module

# The passes `fusec MODEL.mlir` runs when no -p is given.
DEFAULT_PIPELINE = "decompose"

AfterPass = Callable[[ModulePass, ModuleOp], None]


def parse_pipeline_spec(registry: PassRegistry, spec: str) -> list[ModulePass]:
    """Instantiate the passes of `spec`, or a clear error for unknown names,
    unknown options and malformed syntax."""
    try:
        specs = list(parse_pipeline(spec))
    except ArgSpecParseError as err:  # a BaseException in xDSL
        lines = str(err).strip().split("\n")
        detail = lines[-1].strip() if lines else "malformed"
        raise FusecError(f"invalid pass pipeline '{spec}': {detail}") from None
    passes: list[ModulePass] = []
    for s in specs:
        cls = registry.get(s.name)
        try:
            passes.append(cls.from_pass_spec(s))
        except (ValueError, TypeError) as err:
            fields = ", ".join(
                f.name for f in getattr(cls, "__dataclass_fields__", {}).values()
            ) or "none"
            raise FusecError(f"pass '{s.name}': {err} (its options: {fields})") from None
    return passes


@dataclass
class PipelineRunner:
    """Runs passes in order; verifies the module after each one."""

    ctx: Context
    passes: Sequence[ModulePass]
    after_pass: AfterPass | None = None

    def run(self, module: ModuleOp) -> None:
        for p in self.passes:
            try:
                p.apply(self.ctx, module)
            except FusecError:
                raise
            except Exception as err:
                raise InternalPassError(p.name, err) from err
            try:
                verify_module(module)
            except FusecError as err:
                err.message = f"after pass '{p.name}': {err.message}"
                raise
            if self.after_pass is not None:
                self.after_pass(p, module)


class InternalPassError(Exception):
    """A pass crashed: a bug in the pass, not in the user's input."""

    def __init__(self, pass_name: str, cause: Exception) -> None:
        super().__init__(f"internal error in pass '{pass_name}': {type(cause).__name__}: {cause}")
        self.pass_name = pass_name
