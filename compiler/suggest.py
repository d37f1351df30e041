"""'Did you mean ...?' for a misspelt name: a flag, a pass, a pass option."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(name: str, names: Iterable[str]) -> str | None:
    """The known name most like `name` (difflib's ratio of at least 0.6), or None."""
    close = difflib.get_close_matches(name, list(names), n=1)
    return close[0] if close else None


def did_you_mean(name: str, names: Iterable[str]) -> str:
    """`; did you mean 'NAME'?` for the closest known name, or ''."""
    match = closest(name, names)
    return f"; did you mean '{match}'?" if match is not None else ""
