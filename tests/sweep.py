"""Sweeps sampled in the default run: every value of a sweep stays a test,
and all but every `keep_every`-th carries the `slow` mark, so that the
README's test command samples the sweep evenly and the slow set (which CI
runs too) covers the rest."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest


def sampled(values: Iterable[Any], keep_every: int) -> list[Any]:
    """`values` (one argument each) as parameters: those at index 0,
    `keep_every`, 2 * `keep_every`, ... in the default set, the others
    marked slow."""
    return [pytest.param(v, marks=() if i % keep_every == 0 else (pytest.mark.slow,))
            for i, v in enumerate(values)]
