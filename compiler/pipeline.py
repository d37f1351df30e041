"""Pass pipelines: parse a `-p a,b{opt=1}` spec and run it, verifying after
every pass so a broken rewrite is caught where it happens."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec, parse_pipeline
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
        detail = detail[:1].lower() + detail[1:]
        raise FusecError(f"invalid pass pipeline '{spec}': {detail}") from None
    return [_instantiate(registry.get(s.name), s) for s in specs]


def _instantiate(cls: type[ModulePass], spec: ArgSpec) -> ModulePass:
    """`cls` with the options of `spec`; an unknown option or a value of the
    wrong type is named in the error, with the options the pass has."""
    hints = typing.get_type_hints(cls) if dataclasses.is_dataclass(cls) else {}
    fields = dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ()
    options = [f.name for f in fields if f.init and f.name != "name"]
    listed = ", ".join(options) or "none"
    # `erase-dead` on the command line is the field `erase_dead`.
    for key in spec.parameters:
        if key.replace("-", "_") not in options:
            raise FusecError(f"pass '{spec.name}' has no option '{key}' (its options: {listed})")
    try:
        return cls.from_pass_spec(spec)
    except (ValueError, TypeError) as err:
        # Find the option at fault by trying each alone.
        for key, value in spec.normalize_parameter_names().parameters.items():
            try:
                cls.from_pass_spec(ArgSpec(spec.name, {key: value}))
            except (ValueError, TypeError):
                given = ",".join(str(v) for v in value) or "nothing"
                hint = hints.get(key)
                expected = hint.__name__ if isinstance(hint, type) else str(hint)
                raise FusecError(
                    f"pass '{spec.name}': option '{key}' expects {expected}, got '{given}'"
                ) from None
        raise FusecError(f"pass '{spec.name}': {err} (its options: {listed})") from None


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
