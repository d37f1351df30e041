"""A progress bar for long compiles (rich), on stderr.

Shown when stderr is a terminal; `FUSEC_PROGRESS=1` asks for progress
elsewhere, where it is written as one plain line per step
(`fusec: compiling kernels: f_g1_exp (2/2)`: what a log file can hold, and
the same whatever rich's version or terminal detection); `--quiet`
(`set_quiet(True)`) or `FUSEC_PROGRESS=0` silences it. Each step names the
kernel just compiled. Without rich, a terminal gets the plain lines too.

The kernel build's bar counts distinct kernels (those that differ only in
their names are one) and says how many came from the kernel cache. Asked for
a `summary`, a run that draws no bar (stderr not a terminal, or `--quiet`)
prints one line when the bar ends instead, e.g.
`fusec: kernels: 96 launched, 8 distinct: 5 compiled, 3 from the cache (2.4 s)`;
`FUSEC_PROGRESS=0` silences that too.

```python
with progress_bar(len(keys), "compiling kernels", summary=f"{launched} launched") as bar:
    for name in names:
        ...
        bar.advance(name, cached=False)
```
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fusec.analysis.env_switch import switched_off

PROGRESS_ENV = "FUSEC_PROGRESS"
_quiet = False


def set_quiet(quiet: bool) -> None:
    """Silence (or allow again) progress bars in this process (`--quiet`)."""
    global _quiet
    _quiet = quiet


def _silenced() -> bool:
    return switched_off(PROGRESS_ENV)


def progress_wanted() -> bool:
    """Whether a bar should be drawn now."""
    asked = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if _quiet or _silenced():
        return False
    if asked in ("1", "on", "yes", "true"):
        return True
    return sys.stderr.isatty()


class Bar:
    """One running bar: rich's, plain lines (`lines=True`), or nothing."""

    def __init__(self, rich_progress: Any, task: Any, what: str, total: int = 0,
                 lines: bool = False) -> None:
        self._progress = rich_progress
        self._task = task
        self._what = what
        self._total = total
        self._done = 0
        self._lines = lines
        self.cached = 0  # steps whose result came from a cache

    @property
    def done(self) -> int:
        """Steps done so far."""
        return self._done

    def advance(self, name: str, cached: bool = False) -> None:
        """One more step done: `name` (the kernel) was compiled, or found in
        the cache (`cached`)."""
        self._done += 1
        self.cached += cached
        if self._progress is not None:
            hits = f" ({self.cached} from the cache)" if self.cached else ""
            self._progress.update(self._task, advance=1,
                                  description=f"{self._what}{hits}: {name}")
        elif self._lines:
            print(f"fusec: {self._what}: {name} ({self._done}/{self._total})", file=sys.stderr,
                  flush=True)


@contextmanager
def progress_bar(total: int, what: str, summary: str | None = None) -> Iterator[Bar]:
    """A bar of `total` steps titled `what`; a silent one when unwanted,
    which prints one summary line at its end when `summary` is given (the
    text put before the counts, e.g. "96 kernels launched")."""
    begin = time.perf_counter()
    if total < 1 or not progress_wanted():
        bar = Bar(None, None, what)
        yield bar
        if summary is not None and total > 0 and not _silenced():
            fresh = bar.done - bar.cached
            print(f"fusec: {what}: {summary}, {total} distinct: {fresh} compiled, "
                  f"{bar.cached} from the cache ({time.perf_counter() - begin:.1f} s)",
                  file=sys.stderr, flush=True)
        return
    progress = _rich_progress() if sys.stderr.isatty() else None
    if progress is None:  # a log file, or no rich: plain lines
        yield Bar(None, None, what, total, lines=True)
        return
    with progress:
        task = progress.add_task(f"{what}", total=total)
        yield Bar(progress, task, what)


def _rich_progress() -> Any:
    """A transient rich bar on stderr (a terminal), or None without rich."""
    try:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )
    except ImportError:
        return None
    console = Console(file=sys.stderr, force_terminal=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    return Progress(*columns, console=console, transient=True)
