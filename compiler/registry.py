"""The pass registry: names to lazily imported `ModulePass` classes.

Built-in passes (`compiler/builtin_passes.py`) are imported only when used, so
start-up stays fast; xDSL's generic passes that apply to `nn` (`cse`, `dce`,
`canonicalize`) are registered beside them. Users add passes two ways:

- `fusec --load-pass-plugin my_passes.py`: every `ModulePass` subclass defined
  in that file (with a `name`) is registered;
- an installed package declares them in the entry-point group `fusec.passes`:

  ```toml
  [project.entry-points."fusec.passes"]
  my-pass = "my_package.my_pass:MyPass"
  ```
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from importlib.metadata import entry_points
from pathlib import Path

from xdsl.passes import ModulePass

from fusec.analysis.diagnostics import FusecError
from fusec.compiler.builtin_passes import BUILTIN_PASSES, PassFactory
from fusec.compiler.suggest import did_you_mean

# xDSL's generic passes that apply to `nn` programs (every `nn` op is Pure):
# `cse` computes identical ops once, `dce` drops ops nothing reads, and
# `canonicalize` runs the ops' canonicalization patterns (none in `nn` yet)
# with dead-code removal. xDSL's other passes target dialects fusec does not
# use (scf loops, memref, riscv, ...).
XDSL_PASSES: dict[str, str] = {
    "canonicalize": "xDSL: apply the ops' canonicalization patterns, then remove dead ops.",
    "cse": "xDSL: compute identical pure ops once (common subexpression elimination).",
    "dce": "xDSL: remove ops whose results nothing reads (dead code elimination).",
}


def _xdsl_pass(name: str) -> PassFactory:
    def load() -> type[ModulePass]:
        from xdsl.transforms import get_all_passes

        return get_all_passes()[name]()

    return load


class PassRegistry:
    """Known passes by name; plugins and entry points add to it."""

    def __init__(self) -> None:
        self.factories: dict[str, PassFactory] = dict(BUILTIN_PASSES)
        self.origins: dict[str, str] = dict.fromkeys(BUILTIN_PASSES, "fusec")
        for name in XDSL_PASSES:
            self.factories[name] = _xdsl_pass(name)
            self.origins[name] = "xdsl"

    def register(self, name: str, factory: PassFactory, origin: str) -> None:
        """Add a pass; a name already taken is an error naming both owners."""
        if name in self.factories:
            raise FusecError(
                f"pass '{name}' from {origin} clashes with the pass of the same name "
                f"from {self.origins[name]}"
            )
        self.factories[name] = factory
        self.origins[name] = origin

    def load_entry_points(self) -> None:
        """Register passes that installed packages declare under `fusec.passes`."""
        for ep in entry_points(group="fusec.passes"):
            self.register(ep.name, ep.load, f"package entry point '{ep.value}'")

    def load_plugin(self, path: str) -> list[str]:
        """Import a Python file and register the passes it defines."""
        file = Path(path)
        if not file.is_file():
            raise FusecError(f"cannot load pass plugin '{path}': no such file")
        module_name = f"fusec_plugin_{abs(hash(file.resolve()))}"
        spec = importlib.util.spec_from_file_location(module_name, file)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as err:  # the plugin's own bug: report, don't crash
            raise FusecError(
                f"cannot load pass plugin '{path}': {type(err).__name__}: {err}"
            ) from None
        names: list[str] = []
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(cls, ModulePass)
                and cls.__module__ == module_name
                and not inspect.isabstract(cls)
                and isinstance(getattr(cls, "name", None), str)
            ):
                self.register(cls.name, lambda c=cls: c, f"plugin '{path}'")
                names.append(cls.name)
        if not names:
            raise FusecError(f"pass plugin '{path}' defines no ModulePass subclass with a name")
        return names

    def get(self, name: str) -> type[ModulePass]:
        """The pass class for `name`, or an error suggesting close names."""
        if name not in self.factories:
            hint = did_you_mean(name, self.factories) or "; see --list-passes"
            raise FusecError(f"unknown pass '{name}'{hint}")
        try:
            return self.factories[name]()
        except Exception as err:  # a module that fails to import, a missing class
            raise FusecError(
                f"pass '{name}' from {self.origins[name]} cannot be loaded: "
                f"{type(err).__name__}: {err}"
            ) from None

    def describe(self) -> list[tuple[str, str]]:
        """(name, summary) of every pass, sorted by name: the docstring's first
        paragraph on one line (a one-sentence first line for fusec's passes;
        a plugin's summary wrapped over two lines is still shown whole)."""
        rows: list[tuple[str, str]] = []
        for name in sorted(self.factories):
            # xDSL's classes carry no docstring of their own (getdoc would
            # give ModulePass's): theirs is written here.
            doc = XDSL_PASSES.get(name) if self.origins[name] == "xdsl" else None
            doc = doc or inspect.getdoc(self.get(name)) or ""
            rows.append((name, " ".join(doc.split("\n\n")[0].split())))
        return rows
