"""Replacing one of numba-cuda's methods only where it is the method the
replacement was written against: the shared step of the build workers'
patches (`codegen/numba_lowering.py`, `codegen/numba_typing.py`).

A patch hands the class, the method's name and the first 16 hex digits of the
sha256 of the method's source in the pinned numba-cuda; another version
(another digest, or no such method) keeps its own, untouched.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from typing import Any


def source_digest(method: Callable[..., Any]) -> str:
    """The first 16 hex digits of the sha256 of `method`'s source."""
    return hashlib.sha256(inspect.getsource(method).encode()).hexdigest()[:16]


def replace_known(owner: Any, name: str, digest: str,
                  replacement: Callable[[Callable[..., Any]], Callable[..., Any]]) -> bool:
    """Set `owner.name` to `replacement(original)` where the original's
    source has `digest` (`source_digest`); whether it was replaced."""
    try:
        method = getattr(owner, name)
        known = source_digest(method) == digest
    except (AttributeError, OSError, TypeError):
        return False
    if not known:
        return False
    setattr(owner, name, replacement(method))
    return True
