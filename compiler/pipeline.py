"""Pass pipelines: parse a `-p a,b{opt=1}` spec and run it, verifying after
every pass so a broken rewrite is caught where it happens."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import (  # pyright: ignore[reportPrivateUsage]
    ArgSpec,
    _convert_arg_to_type,
    parse_pipeline,
)
from xdsl.utils.exceptions import ArgSpecParseError

from fusec.analysis.diagnostics import FusecError, InternalError
from fusec.compiler.instrument import Instrumentation
from fusec.compiler.pass_error import InternalPassError as InternalPassError
from fusec.compiler.registry import PassRegistry
from fusec.compiler.suggest import did_you_mean
from fusec.compiler.verify import verify_module


def parse_pipeline_spec(registry: PassRegistry, spec: str,
                        insertions: Sequence[Insertion] = ()) -> list[ModulePass]:
    """Instantiate the passes of `spec` (with `insertions` applied), or a clear
    error for unknown names, unknown options and malformed syntax."""
    specs = _parse_specs(spec)
    for insertion in insertions:
        specs = insertion.apply(specs)
    return [_instantiate(registry.get(s.name), s) for s in specs]


def _parse_specs(spec: str) -> list[ArgSpec]:
    try:
        return list(parse_pipeline(spec))
    except ArgSpecParseError as err:  # a BaseException in xDSL
        lines = str(err).strip().split("\n")
        detail = lines[-1].strip() if lines else "malformed"
        detail = detail[:1].lower() + detail[1:]
        raise FusecError(f"invalid pass pipeline '{spec}': {detail}") from None


@dataclass(frozen=True)
class Insertion:
    """`--insert-after NAME=PASSES` / `--insert-before NAME=PASSES`: PASSES (a
    pipeline spec, usually one pass) go next to every occurrence of the pass
    NAME; a NAME the pipeline does not hold is an error listing the pipeline."""

    flag: str  # "--insert-after" or "--insert-before"
    anchor: str
    passes: str

    @classmethod
    def parse(cls, flag: str, text: str) -> Insertion:
        """`NAME=PASSES` as given after `flag`."""
        anchor, eq, passes = text.partition("=")
        if not eq or not anchor.strip() or not passes.strip():
            raise FusecError(f"{flag} expects NAME=PASS (e.g. {flag} decompose=my-pass), "
                             f"got '{text}'")
        return cls(flag, anchor.strip(), passes.strip())

    def apply(self, specs: list[ArgSpec]) -> list[ArgSpec]:
        """`specs` with the passes inserted."""
        if all(s.name != self.anchor for s in specs):
            names = ",".join(s.name for s in specs) or "(empty)"
            hint = did_you_mean(self.anchor, [s.name for s in specs])
            raise FusecError(f"{self.flag} {self.anchor}={self.passes}: the pipeline has no "
                             f"pass '{self.anchor}'{hint} (it runs {names})")
        added = _parse_specs(self.passes)
        out: list[ArgSpec] = []
        for s in specs:
            before = s.name == self.anchor and self.flag == "--insert-before"
            after = s.name == self.anchor and not before
            out.extend([*(added if before else []), s, *(added if after else [])])
        return out


def _instantiate(cls: type[ModulePass], spec: ArgSpec) -> ModulePass:
    """`cls` with the options of `spec`. An unknown option, a value of the
    wrong type, and the pass's own validation message (a `ValueError` from
    its `__post_init__`) are errors naming the pass and the option, spelled as
    on the command line (`erase-dead` for the field `erase_dead`)."""
    if not dataclasses.is_dataclass(cls):
        return cls.from_pass_spec(spec)
    hints = typing.get_type_hints(cls)
    options = [f.name for f in dataclasses.fields(cls) if f.init and f.name != "name"]
    listed = ", ".join(option_name(o) for o in options) or "none"
    given = spec.normalize_parameter_names().parameters
    for key in spec.parameters:
        if key.replace("-", "_") not in options:
            hint = did_you_mean(key, [option_name(o) for o in options])
            raise FusecError(f"pass '{spec.name}' has no option '{key}'{hint} "
                             f"(its options: {listed})")
    for f in dataclasses.fields(cls):
        if f.init and f.name in options and f.name not in given and \
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise FusecError(f"pass '{spec.name}' needs the option '{option_name(f.name)}'")
    kwargs: dict[str, object] = {}
    for key, value in given.items():
        try:
            kwargs[key] = _convert_arg_to_type(value, hints[key])
        except ValueError:
            text = ",".join(str(v) for v in value) or "nothing"
            hint = hints[key]
            expected = hint.__name__ if isinstance(hint, type) else str(hint)
            raise FusecError(f"pass '{spec.name}': option '{option_name(key)}' expects "
                             f"{expected}, got '{text}'") from None
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as err:
        raise FusecError(f"pass '{spec.name}'{_culprit(cls, kwargs)}: {err}") from None


def _culprit(cls: type[ModulePass], kwargs: dict[str, object]) -> str:
    """` option 'x'` when the option `x` (beside the required ones) makes `cls`
    reject its arguments; empty when no single option does."""
    required = {k: v for k, v in kwargs.items() if k in cls.required_fields()}
    optional = [k for k in kwargs if k not in required]
    if len(kwargs) == 1:
        return f" option '{option_name(next(iter(kwargs)))}'"
    for key in optional:
        try:
            cls(**required, **{key: kwargs[key]})
        except (ValueError, TypeError):
            return f" option '{option_name(key)}'"
    return ""


def option_name(field_name: str) -> str:
    """A pass option as the command line spells it: `erase_dead` is `erase-dead`."""
    return field_name.replace("_", "-")


def pass_spec_text(p: ModulePass) -> str:
    """`p` as a pipeline element that builds it again: its name and the options
    that differ from their defaults, e.g. `register-budget{max-registers=48}`."""
    spec = p.pipeline_pass_spec()
    params = {option_name(k): v for k, v in spec.parameters.items()}
    return str(ArgSpec(spec.name, params))


def pipeline_text(passes: Sequence[ModulePass]) -> str:
    """The spec of a whole pipeline: `fusec -p '<it>'` runs the same passes."""
    return ",".join(pass_spec_text(p) for p in passes)


@dataclass
class PipelineRunner:
    """Runs passes in order; verifies the module after each one. `instrument`
    sees each pass before and after it runs (IR dumps, timing)."""

    ctx: Context
    passes: Sequence[ModulePass]
    instrument: Instrumentation | None = None

    def run(self, module: ModuleOp) -> None:
        instrument = self.instrument or Instrumentation()
        for p in self.passes:
            instrument.before(p, module)
            with instrument.timer.timed(p.name):
                self._apply(p, module)
            with instrument.timer.timed("(verifier)"):
                try:
                    verify_module(module)
                except FusecError as err:
                    err.message = f"after pass '{p.name}': {err.message}"
                    raise
            instrument.after(p, module)

    def _apply(self, p: ModulePass, module: ModuleOp) -> None:
        try:
            p.apply(self.ctx, module)
        except (FusecError, InternalError):
            raise
        except Exception as err:
            raise InternalPassError(p.name, err) from err
