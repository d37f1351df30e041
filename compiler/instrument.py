"""Pass instrumentation: IR dumps around chosen passes and a timing table.

```
fusec MODEL -o OUT --print-ir-after=form-fusion-groups   # the IR after that pass, on stderr
fusec MODEL -o OUT --print-ir-before=decompose           # ... before it
fusec MODEL -o OUT --print-ir-after-all                  # after every pass
fusec MODEL -o OUT --mlir-timing                         # wall time per pass, on stderr
```

Dumps use MLIR's headers (`// -----// IR Dump After decompose //----- //`).
The timing table follows `mlir-opt --mlir-timing`: one row per pass in the
order they ran, the verifier (run after every pass) and the other stages of
the job (parsing, code generation, writing OUT) as rows of their own, and the
total wall time of the job.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from fusec.analysis.diagnostics import FusecError
from fusec.compiler.suggest import did_you_mean

_RULE = "===" + "-" * 73 + "==="


@dataclass
class PassTimer:
    """Wall time per stage; does nothing unless `enabled`. Stages of the same
    name run more than once (the verifier) add up in one row; passes get a row
    per run, so a pass that appears twice in the pipeline shows twice."""

    enabled: bool = False
    rows: list[tuple[str, float]] = field(default_factory=list[tuple[str, float]])
    start: float = field(default_factory=time.perf_counter)

    @contextmanager
    def timed(self, name: str, merge: bool = False) -> Iterator[None]:
        """Time the block as the row `name` (added to an earlier `name` row
        when `merge`, or when the name is in parentheses: a stage, not a pass)."""
        if not self.enabled:
            yield
            return
        begin = time.perf_counter()
        try:
            yield
        finally:
            self._add(name, time.perf_counter() - begin, merge or name.startswith("("))

    def _add(self, name: str, seconds: float, merge: bool) -> None:
        if merge:
            for i, (row, total) in enumerate(self.rows):
                if row == name:
                    self.rows[i] = (row, total + seconds)
                    return
        self.rows.append((name, seconds))

    def report(self) -> str:
        """The table, in `--mlir-timing`'s layout."""
        total = time.perf_counter() - self.start
        other = max(total - sum(s for _, s in self.rows), 0.0)
        rows = [*self.rows, ("(rest of fusec)", other), ("Total", total)]
        lines = [_RULE, f"{'... Execution time report ...':^79}".rstrip(), _RULE,
                 f"  Total Execution Time: {total:.4f} seconds", "",
                 "  ----Wall Time----  ----Name----"]
        scale = 100.0 / total if total > 0 else 0.0
        lines += [f"  {s:9.4f} ({s * scale:5.1f}%)  {name}" for name, s in rows]
        return "\n".join(lines) + "\n"


@dataclass
class Instrumentation:
    """What to show around each pass: IR before/after the passes named, after
    all of them, and the timer. Dumps go to stderr."""

    print_before: frozenset[str] = frozenset()
    print_after: frozenset[str] = frozenset()
    print_after_all: bool = False
    generic: bool = False
    remarks_in_ir: bool = False  # printed and written IR keeps `fusion.remarks`
    timer: PassTimer = field(default_factory=PassTimer)

    def check_names(self, passes: Iterable[ModulePass]) -> None:
        """A `--print-ir-before/after` name that no pass of the pipeline has
        is an error, not a dump that silently never happens."""
        names = [p.name for p in passes]
        for flag, wanted in (("--print-ir-before", self.print_before),
                             ("--print-ir-after", self.print_after)):
            for name in sorted(wanted - set(names)):
                ran = ",".join(names) or "(empty)"
                raise FusecError(f"{flag}={name}: the pipeline has no pass '{name}'"
                                 f"{did_you_mean(name, names)} (it runs {ran})")

    def before(self, p: ModulePass, module: ModuleOp) -> None:
        """Called before `p` runs."""
        if p.name in self.print_before:
            self._dump("Before", p, module)

    def after(self, p: ModulePass, module: ModuleOp) -> None:
        """Called after `p` ran and the module verified."""
        if self.print_after_all or p.name in self.print_after:
            self._dump("After", p, module)

    def _dump(self, when: str, p: ModulePass, module: ModuleOp) -> None:
        from fusec.compiler.driver import module_to_text  # driver imports the pipeline

        sys.stderr.write(f"// -----// IR Dump {when} {p.name} //----- //\n")
        sys.stderr.write(module_to_text(module, self.generic, self.remarks_in_ir))
