"""A progress bar for long compiles (rich), on stderr.

Shown when stderr is a terminal; `FUSEC_PROGRESS=1` asks for it elsewhere
(a log file gets rich's plain rendering); `--quiet` (`set_quiet(True)`) or
`FUSEC_PROGRESS=0` silences it. Each step names the kernel just compiled.

```python
with progress_bar(len(names), "compiling kernels") as bar:
    for name in names:
        ...
        bar.advance(name)
```
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

PROGRESS_ENV = "FUSEC_PROGRESS"
_quiet = False


def set_quiet(quiet: bool) -> None:
    """Silence (or allow again) progress bars in this process (`--quiet`)."""
    global _quiet
    _quiet = quiet


def progress_wanted() -> bool:
    """Whether a bar should be drawn now."""
    asked = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if _quiet or asked in ("0", "off", "no", "false"):
        return False
    if asked in ("1", "on", "yes", "true"):
        return True
    return sys.stderr.isatty()


class Bar:
    """One running bar (or nothing, when progress is off)."""

    def __init__(self, rich_progress: Any, task: Any, what: str) -> None:
        self._progress = rich_progress
        self._task = task
        self._what = what

    def advance(self, name: str) -> None:
        """One more step done: `name` (the kernel) was compiled."""
        if self._progress is not None:
            self._progress.update(self._task, advance=1, description=f"{self._what}: {name}")


@contextmanager
def progress_bar(total: int, what: str) -> Iterator[Bar]:
    """A bar of `total` steps titled `what`; a silent one when unwanted."""
    if total < 1 or not progress_wanted():
        yield Bar(None, None, what)
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    console = Console(file=sys.stderr)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=console.is_terminal) as progress:
        task = progress.add_task(f"{what}", total=total)
        yield Bar(progress, task, what)
